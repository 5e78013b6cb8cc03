"""The REST API through a real ``slurm-attrib serve`` process: diagnoses byte-identical to the CLI's,
tokens, recording, the read endpoints against the CLI's own reports, OpenAPI, metrics."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from .conftest import FILE_TOKEN, GOLDEN, NOW, TOKEN, Server, bundle_tar

CASES = ("02_xid79_fallen_off_bus", "05_cuda_oom", "11_two_faults_same_second", "13_empty")


def cli(*args: str) -> bytes:
    done = subprocess.run([sys.executable, "-m", "slurm_attrib.cli", *args], capture_output=True, check=True,
                          env={"SLURM_ATTRIB_CONFIG": "/nonexistent/slurm-attrib.yaml", "PATH": "/usr/bin:/bin"})
    return done.stdout


@pytest.mark.parametrize("case", CASES)
def test_posted_bundle_gives_the_cli_diagnosis_byte_for_byte(server: Server, case: str) -> None:
    bundle = GOLDEN / case / "bundle"
    reply = server.call("POST", "/v1/diagnoses", bundle_tar(bundle), TOKEN, {"Content-Type": "application/gzip"})
    assert reply.status == 200, reply.body
    assert reply.headers["content-type"] == "application/json"
    assert reply.body == cli("diagnose", "--bundle", str(bundle), "--format", "json", "--no-site-rules")


def test_a_bundle_under_one_top_directory_is_found(server: Server) -> None:
    bundle = GOLDEN / "05_cuda_oom" / "bundle"
    flat = server.call("POST", "/v1/diagnoses", bundle_tar(bundle), TOKEN)
    nested = server.call("POST", "/v1/diagnoses", bundle_tar(bundle, prefix="bundle/"), TOKEN)
    assert nested.status == 200 and nested.body == flat.body


def multipart(field: str, filename: str, data: bytes) -> tuple[bytes, dict[str, str]]:
    boundary = "slurmattrib0boundary7f3a"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\n"
            f"Content-Type: application/gzip\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def test_a_multipart_upload_gives_the_same_diagnosis(server: Server) -> None:
    bundle = bundle_tar(GOLDEN / "05_cuda_oom" / "bundle")
    plain = server.call("POST", "/v1/diagnoses", bundle, TOKEN)
    body, headers = multipart("bundle", "b.tar.gz", bundle)
    form = server.call("POST", "/v1/diagnoses", body, TOKEN, headers)
    assert form.status == 200 and form.body == plain.body
    body, headers = multipart("other", "b.tar.gz", bundle)
    wrong = server.call("POST", "/v1/diagnoses", body, TOKEN, headers)
    assert (wrong.status, wrong.json()) == (400, {"detail": "multipart body without a file field 'bundle'"})


@pytest.mark.parametrize(("token", "why"), [(None, "missing"), ("wrong-token", "wrong"), ("", "missing")])
def test_writes_without_the_right_token_are_refused(server: Server, token: str | None, why: str) -> None:
    reply = server.call("POST", "/v1/diagnoses?store=true", bundle_tar(GOLDEN / "05_cuda_oom" / "bundle"), token)
    assert reply.status == 401
    assert reply.headers["www-authenticate"] == "Bearer"
    assert why in reply.json()["detail"]
    assert server.call("GET", "/v1/diagnoses/orion/318790").status == 404  # nothing was recorded


def test_the_token_file_and_the_environment_token_both_write(server: Server) -> None:
    body = bundle_tar(GOLDEN / "05_cuda_oom" / "bundle")
    assert server.call("POST", "/v1/diagnoses", body, FILE_TOKEN).status == 200
    assert server.call("POST", "/v1/diagnoses", body, TOKEN).status == 200


def test_store_true_records_the_verdict_the_cli_would(server: Server, tmp_path: Path) -> None:
    bundle = GOLDEN / "02_xid79_fallen_off_bus" / "bundle"
    reply = server.call("POST", "/v1/diagnoses?store=true", bundle_tar(bundle), TOKEN)
    assert reply.status == 200, reply.body
    assert reply.headers["x-slurm-attrib-stored"] == "store"
    cli_store = tmp_path / "cli.sqlite"
    expected = cli("diagnose", "--bundle", str(bundle), "--format", "json", "--no-site-rules", "--store",
                   str(cli_store), "--now", NOW, "--spool-dir", str(tmp_path / "verdicts"))
    assert reply.body == expected
    shown = server.call("GET", "/v1/diagnoses/orion/318517")
    assert shown.status == 200
    assert shown.json()["diagnosis"] == json.loads(expected)
    assert shown.json()["verdict_id"] == reply.headers["x-slurm-attrib-verdict-id"]
    assert "syslog/node-01.log" in shown.json()["bundle"]["names"]
    listed = server.call("GET", "/v1/diagnoses?node=node-01").json()["items"]
    assert [(r["cluster"], r["job_id"]) for r in listed] == [("orion", "318517")]


def test_unknown_job_is_404_with_one_line(server: Server) -> None:
    reply = server.call("GET", "/v1/diagnoses/orion/999999")
    assert reply.status == 404
    assert reply.json() == {"detail": "no verdict for job 999999 on cluster orion"}


def test_a_bundle_without_job_yaml_is_400(server: Server) -> None:
    from .conftest import tar_gz

    reply = server.call("POST", "/v1/diagnoses", tar_gz({"syslog/a.log": b"x\n"}), TOKEN)
    assert reply.status == 400
    assert "job.yaml" in reply.json()["detail"]


# -- reads against the CLI's reports -----------------------------------------------------------------


def store_cli(server: Server, *args: str) -> object:
    return json.loads(cli(*args, "--store", str(server.store), "--format", "json", "--now", NOW))


def test_list_pages_with_a_cursor_and_matches_query(demo_server: Server) -> None:
    everything = demo_server.call("GET", "/v1/diagnoses?limit=1000").json()
    assert everything["next_cursor"] is None
    assert everything["items"] == store_cli(demo_server, "query", "--limit", "1000")
    seen, cursor = [], ""
    while True:
        page = demo_server.call("GET", f"/v1/diagnoses?limit=4{'&cursor=' + cursor if cursor else ''}").json()
        seen += page["items"]
        assert len(page["items"]) <= 4
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
    assert seen == everything["items"] and len(seen) >= 19


@pytest.mark.parametrize("query", ["node=node-01", "category=gpu_memory", "status=unattributed", "cluster=helios",
                                   "user=rsato&partition=h100", "since=2026-11-23&until=2026-11-25"])
def test_list_filters_are_those_of_query(demo_server: Server, query: str) -> None:
    options = [part for pair in query.split("&") for part in (f"--{pair.split('=')[0]}", pair.split("=")[1])]
    assert demo_server.call("GET", f"/v1/diagnoses?{query}").json()["items"] == store_cli(demo_server, "query",
                                                                                        *options)


def test_nodes_and_stats_are_the_cli_reports(demo_server: Server) -> None:
    assert demo_server.call("GET", "/v1/nodes").json() == store_cli(demo_server, "nodes")
    assert demo_server.call("GET", "/v1/nodes?min_jobs=2").json() == store_cli(demo_server, "nodes", "--min-jobs", "2")
    assert demo_server.call("GET", "/v1/stats?by=day").json() == store_cli(demo_server, "stats", "--by", "day")
    assert demo_server.call("GET", "/v1/stats?by=month").status == 422


def test_show_is_the_cli_show_with_file_names(demo_server: Server) -> None:
    api = demo_server.call("GET", "/v1/diagnoses/orion/318601").json()
    shown = store_cli(demo_server, "show", "318601", "--cluster", "orion")
    names = api["bundle"].pop("names")
    assert api == shown
    assert "job.yaml" in names and names == sorted(names)


def test_bad_cursor_is_400(demo_server: Server) -> None:
    assert demo_server.call("GET", "/v1/diagnoses?cursor=nonsense").status == 400


def test_rules_are_the_engine_rules_in_order(demo_server: Server) -> None:
    from slurm_attrib.ruleset import load_ruleset

    rules = demo_server.call("GET", "/v1/rules").json()
    assert [r["id"] for r in rules] == [r.id for r in load_ruleset(include_site=False).rules]


def test_openapi_is_generated_from_the_models(demo_server: Server) -> None:
    doc = demo_server.call("GET", "/openapi.json").json()
    schemas = doc["components"]["schemas"]
    assert {"Diagnosis", "RootCause", "Evidence", "VerdictPage", "JobVerdict", "NodeBundleReceipt"} <= set(schemas)
    assert "root_cause" in schemas["Diagnosis"]["properties"]
    for path in ("/v1/diagnoses", "/v1/diagnoses/{cluster}/{job}", "/v1/node-bundles", "/v1/nodes", "/v1/stats",
                 "/v1/rules", "/healthz", "/metrics"):
        assert path in doc["paths"], path
    ok = doc["paths"]["/v1/diagnoses"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/Diagnosis"}
    assert "application/gzip" in doc["paths"]["/v1/diagnoses"]["post"]["requestBody"]["content"]
    assert demo_server.call("GET", "/docs").status == 404  # the Swagger page would load scripts from a CDN


def test_golden_diagnoses_fit_the_models(engine: object) -> None:
    from slurm_attrib.service.models import Diagnosis

    for bundle in sorted(GOLDEN.glob("*/bundle")):
        Diagnosis.model_validate(engine.diagnose(bundle).to_dict())  # type: ignore[attr-defined]


# -- metrics -------------------------------------------------------------------------------------------


def samples(server: Server) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    reply = server.call("GET", "/metrics")
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/plain")
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(reply.body.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_metrics_count_what_the_store_holds(demo_server: Server) -> None:
    got = samples(demo_server)
    stats = store_cli(demo_server, "stats", "--by", "week")
    assert isinstance(stats, list)
    total = sum(b["jobs"] for b in stats)
    assert sum(got["slurm_attrib_verdicts"].values()) == total
    for status in ("attributed", "ambiguous", "unattributed"):
        assert sum(v for k, v in got["slurm_attrib_verdicts"].items() if ("status", status) in k) == \
            sum(b["by_status"].get(status, 0) for b in stats)
    for category in {c for b in stats for c in b["by_category"]}:
        assert sum(v for k, v in got["slurm_attrib_verdicts"].items() if ("category", category) in k) == \
            sum(b["by_category"].get(category, {}).get("jobs", 0) for b in stats)
    listed = demo_server.call("GET", "/v1/diagnoses?status=attributed&category=gpu_memory&limit=1000").json()
    assert got["slurm_attrib_verdicts"][(("category", "gpu_memory"), ("status", "attributed"))] == len(listed["items"])
    gpu_memory = sum(b["by_category"].get("gpu_memory", {}).get("gpu_hours", 0.0) for b in stats)
    assert got["slurm_attrib_lost_gpu_hours"][(("category", "gpu_memory"),)] == pytest.approx(gpu_memory, abs=0.02)
    nodes = store_cli(demo_server, "nodes", "--since", "30d")  # the culprit-history window before --now
    assert isinstance(nodes, list)
    assert got["slurm_attrib_culprit_jobs"] == {(("cluster", r["cluster"]), ("node", r["node"])): r["jobs"]
                                                for r in nodes}
    assert got["slurm_attrib_store_up"] == {(): 1.0}


def test_metrics_latency_and_queue_depth(server: Server) -> None:
    before = samples(server).get("slurm_attrib_diagnosis_seconds_count", {}).get((), 0.0)
    assert server.call("POST", "/v1/diagnoses", bundle_tar(GOLDEN / "13_empty" / "bundle"), TOKEN).status == 200
    got = samples(server)
    assert got["slurm_attrib_diagnosis_seconds_count"][()] == before + 1
    queue = server.spool / "queue"
    queue.mkdir(parents=True, exist_ok=True)
    for job in ("71", "72"):
        entry = {"hook": "epilog_slurmctld", "enqueued_at": 1.0, "env": {"SLURM_CLUSTER_NAME": "orion",
                                                                       "SLURM_JOB_ID": job,
                                                                       "SLURM_JOB_RESTART_COUNT": "0"}}
        (queue / f"orion_{job}_0.json").write_text(json.dumps(entry))
    try:
        assert samples(server)["slurm_attrib_finalizer_queue_depth"] == {(): 2.0}
    finally:
        shutil.rmtree(queue)


def test_job_yaml_of_the_cases_is_what_the_tests_assume() -> None:
    job = yaml.safe_load((GOLDEN / "02_xid79_fallen_off_bus" / "bundle" / "job.yaml").read_text())
    assert (job["cluster"], str(job["job_id"])) == ("orion", "318517")


def test_several_processes_answer_alike_and_sum_the_latency(tmp_path: Path) -> None:
    """service.processes: 2 serves the same API from two processes on one port: every read answers the
    same, the diagnoses counted by /metrics are those of both processes whichever one is scraped."""
    from .conftest import start_server

    running = start_server(tmp_path / "two", config_extra="  processes: 2\n")
    try:
        deadline = time.monotonic() + 30
        while running.log.read_text().count("Application startup complete") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert running.log.read_text().count("Started server process") == 2, running.log.read_text()
        body = bundle_tar(GOLDEN / "13_empty" / "bundle")
        for _ in range(8):  # a new connection each: the kernel hands them to either process
            assert running.call("POST", "/v1/diagnoses", body, TOKEN).status == 200
        counts = {samples(running)["slurm_attrib_diagnosis_seconds_count"][()] for _ in range(8)}
        assert counts == {8.0}
        assert len({running.call("GET", "/v1/rules").body for _ in range(8)}) == 1
    finally:
        running.stop()
