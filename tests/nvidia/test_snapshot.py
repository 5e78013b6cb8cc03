"""What an nvidia-smi -q -x snapshot says about each GPU's memory (slurm_attrib.nvidia.snapshot)."""

from __future__ import annotations

from slurm_attrib.nvidia.snapshot import gpu_memory_states

A100 = """<nvidia_smi_log>
  <gpu id="00000000:07:00.0">
    <ecc_errors>
      <volatile>
        <sram_correctable>12</sram_correctable>
        <sram_uncorrectable>0</sram_uncorrectable>
        <dram_correctable>3</dram_correctable>
        <dram_uncorrectable>{dram}</dram_uncorrectable>
      </volatile>
      <aggregate>
        <dram_uncorrectable>5</dram_uncorrectable>
      </aggregate>
    </ecc_errors>
    <remapped_rows>
      <remapped_row_pending>{pending}</remapped_row_pending>
      <remapped_row_failure>No</remapped_row_failure>
    </remapped_rows>
    <processes>
      <process_info><process_name>&lt;remapped_row_pending&gt;Yes&lt;</process_name></process_info>
      <process_info><process_name><remapped_row_pending>Yes</remapped_row_pending></process_name></process_info>
    </processes>
  </gpu>
  <gpu id="00000000:0A:00.0">
    <ecc_errors>
      <volatile>
        <single_bit><device_memory>0</device_memory><total>4</total></single_bit>
        <double_bit><device_memory>0</device_memory><total>0</total></double_bit>
      </volatile>
    </ecc_errors>
  </gpu>
  <gpu id="00000000:0B:00.0">
    <ecc_errors>
      <volatile>
        <dram_uncorrectable>N/A</dram_uncorrectable>
      </volatile>
    </ecc_errors>
  </gpu>
</nvidia_smi_log>
"""


def test_each_gpu_is_read_from_its_own_block_above_its_processes() -> None:
    states = gpu_memory_states(A100.format(dram=0, pending="No"))
    assert sorted(states) == ["0000:07:00", "0000:0a:00", "0000:0b:00"]
    assert states["0000:07:00"].clean  # corrected errors and the lifetime (aggregate) count say nothing of this job
    assert states["0000:0a:00"].clean  # the older layout: the volatile double-bit total
    assert states["0000:0b:00"].uncorrectable is None and not states["0000:0b:00"].clean  # ECC off: no count


def test_an_uncorrectable_count_or_a_waiting_remap_is_no_clean_memory() -> None:
    assert gpu_memory_states(A100.format(dram=2, pending="No"))["0000:07:00"].uncorrectable == 2
    assert not gpu_memory_states(A100.format(dram=2, pending="No"))["0000:07:00"].clean
    waiting = gpu_memory_states(A100.format(dram=0, pending="Yes"))["0000:07:00"]
    assert waiting.pending and not waiting.clean
