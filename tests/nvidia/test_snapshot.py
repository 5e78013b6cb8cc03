"""What an nvidia-smi -q -x snapshot says about each GPU's memory (slurm_attrib.nvidia.snapshot)."""

from __future__ import annotations

from slurm_attrib.nvidia.snapshot import gpu_memory_states

SNAPSHOT = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <gpu id="00000000:07:00.0">
    <ecc_errors>
      <volatile>
        <sram_correctable>12</sram_correctable>
        <sram_uncorrectable>0</sram_uncorrectable>
        <dram_correctable>3</dram_correctable>
        <dram_uncorrectable>{dram}</dram_uncorrectable>
      </volatile>
      <aggregate>
        <dram_correctable>40</dram_correctable>
        <dram_uncorrectable>{lifetime}</dram_uncorrectable>
      </aggregate>
    </ecc_errors>
    <remapped_rows>
      <remapped_row_unc>0</remapped_row_unc>
      <remapped_row_pending>{pending}</remapped_row_pending>
      <remapped_row_failure>No</remapped_row_failure>
    </remapped_rows>
    <processes>
      <process_info><process_name>&lt;gpu id="00000000:0A:00.0"&gt;&lt;dram_uncorrectable&gt;0</process_name>
      </process_info>
      <process_info><process_name><gpu id="00000000:0B:00.0"><ecc_errors><volatile>
        <dram_uncorrectable>0</dram_uncorrectable></volatile></ecc_errors></gpu></process_name></process_info>
    </processes>
  </gpu>
  <gpu id="00000000:0A:00.0">
    <ecc_errors>
      <volatile>
        <single_bit><device_memory>0</device_memory><total>4</total></single_bit>
        <double_bit><device_memory>0</device_memory><total>{double}</total></double_bit>
      </volatile>
    </ecc_errors>
  </gpu>
  <gpu id="00000000:0C:00.0">
    <ecc_errors>
      <volatile>
        <dram_uncorrectable>N/A</dram_uncorrectable>
      </volatile>
    </ecc_errors>
  </gpu>
</nvidia_smi_log>
"""


def snapshot(dram: int = 0, lifetime: int = 0, pending: str = "No", double: int = 0) -> bytes:
    return SNAPSHOT.format(dram=dram, lifetime=lifetime, pending=pending, double=double).encode()


def test_each_gpu_is_read_from_its_own_element_never_from_a_process_name() -> None:
    states = gpu_memory_states(snapshot())
    # a process named like a GPU block (escaped, or well-formed elements inside its name) is no GPU of the snapshot
    assert sorted(states) == ["0000:07:00", "0000:0a:00", "0000:0c:00"]
    assert states["0000:07:00"].clean  # corrected errors say nothing
    assert states["0000:0a:00"].clean  # the older layout: the volatile double-bit total
    assert states["0000:0c:00"].uncorrectable is None and not states["0000:0c:00"].clean  # ECC off: no count
    assert gpu_memory_states(snapshot(double=1))["0000:0a:00"].uncorrectable == 1


def test_a_count_a_waiting_remap_or_any_uncorrectable_error_ever_is_no_clean_memory() -> None:
    assert gpu_memory_states(snapshot(dram=2))["0000:07:00"].uncorrectable == 2
    assert not gpu_memory_states(snapshot(dram=2))["0000:07:00"].clean
    assert not gpu_memory_states(snapshot(pending="Yes"))["0000:07:00"].clean
    reset_since = gpu_memory_states(snapshot(lifetime=1))["0000:07:00"]  # a reset zeroed the volatile counts
    assert reset_since.uncorrectable == 0 and reset_since.history and not reset_since.clean


def test_a_document_that_does_not_parse_gives_no_gpu() -> None:
    assert gpu_memory_states(b"<nvidia_smi_log><gpu id=") == {}
    assert gpu_memory_states(b"\x00\xff garbage") == {}
    unclosed = snapshot().replace(b"</dram_uncorrectable>", b"", 1)  # a name that broke the document
    assert gpu_memory_states(unclosed) == {}
