"""A symptom's summary from its rule's template: an aside whose fields the line did not give is left out."""

from slurm_attrib.engine.extract import render_summary
from slurm_attrib.model import Symptom

TEMPLATE = "cuda out of memory on rank {rank} (tried to allocate {requested})"


def _symptom(**fields: object) -> Symptom:
    return Symptom(kind="cuda_oom", rule_id="app.cuda_oom", node=None, time=None, evidence=[], rank=3,
                   fields=dict(fields))


def test_an_aside_without_its_field_is_left_out() -> None:
    assert render_summary(TEMPLATE, _symptom()) == "cuda out of memory on rank 3"


def test_an_aside_with_its_field_stays() -> None:
    assert render_summary(TEMPLATE, _symptom(requested="2.00 GiB")) == \
        "cuda out of memory on rank 3 (tried to allocate 2.00 GiB)"


def test_an_aside_stays_when_any_of_its_fields_is_given() -> None:
    template = "link down ({port}{device})"
    assert render_summary(template, _symptom(device="mlx5_0")) == "link down (mlx5_0)"


def test_parentheses_without_fields_are_the_template_own_words() -> None:
    assert render_summary("a (literal) aside on {node}", _symptom()) == "a (literal) aside on ?"
