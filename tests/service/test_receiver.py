"""The epilog's HTTP spool against the real receiver: what ``deliver()`` sends with ``UrllibPoster`` lands
in ``<spool>/nodes/<job key>/<node>/`` whole, where the finalizer's ``arrived()`` finds it, and a retry
replaces it."""

from __future__ import annotations

from pathlib import Path

from slurm_attrib.connectors.spool import NodeBundle, UrllibPoster, deliver, job_key
from slurm_attrib.finalizer.nodebundles import arrived, staged

from .conftest import TOKEN, Server, tar_gz


def built(tmp_path: Path, node: str, text: bytes) -> NodeBundle:
    bundle = NodeBundle.create(tmp_path / "staging" / node, node)
    bundle.write("syslog/kern.log", text)
    bundle.write("collection.yaml", b"node: " + node.encode() + b"\n")
    return bundle


def test_deliver_over_http_lands_where_the_finalizer_looks(server: Server, tmp_path: Path) -> None:
    key = job_key("orion", "4711", 0)
    url = server.url + "/v1/node-bundles"
    done = deliver(built(tmp_path, "node-07", b"Xid 79\n"), tmp_path / "node-spool", tmp_path / "fallback", key,
                   "node-07", http_url=url, http_timeout=10, poster=UrllibPoster())
    assert (done.destination, done.notes) == ("http", ())
    found = arrived(server.spool, key)
    assert list(found) == ["node-07"]
    assert (found["node-07"] / "syslog" / "kern.log").read_bytes() == b"Xid 79\n"
    assert not (tmp_path / "node-spool").exists() and not (tmp_path / "fallback").exists()
    assert staged(server.spool, key) == []


def test_a_retry_replaces_the_bundle_atomically(server: Server, tmp_path: Path) -> None:
    key = job_key("orion", "4712", 1)
    url = server.url + "/v1/node-bundles"
    for text in (b"first\n", b"second\n"):
        done = deliver(built(tmp_path / text.decode().strip(), "node-08", text), tmp_path / "s", tmp_path / "f", key,
                       "node-08", http_url=url, http_timeout=10, poster=UrllibPoster())
        assert done.destination == "http"
    folder = server.spool / "nodes" / key
    assert sorted(p.name for p in folder.iterdir()) == ["node-08"]  # no staging or .old folder left
    assert (folder / "node-08" / "syslog" / "kern.log").read_bytes() == b"second\n"


def test_the_same_post_twice_answers_the_same(server: Server) -> None:
    body = tar_gz({"syslog/kern.log": b"same\n"})
    first = server.call("POST", "/v1/node-bundles/orion/4713/node-09?restart_count=2", body)
    again = server.call("POST", "/v1/node-bundles/orion/4713/node-09?restart_count=2", body)
    assert first.json() == {"files": 1, "job_key": "orion_4713_2", "node": "node-09", "replaced": False}
    assert again.json() == {"files": 1, "job_key": "orion_4713_2", "node": "node-09", "replaced": True}
    assert list(arrived(server.spool, "orion_4713_2")) == ["node-09"]


def test_names_that_would_leave_the_spool_are_refused(server: Server) -> None:
    body = tar_gz({"syslog/kern.log": b"x\n"})
    for key, node in (("..", "node-01"), ("orion_1_0", ".."), ("orion_1_0", "a/b"), ("orion_1_0", ".hidden")):
        reply = server.call("POST", "/v1/node-bundles", body, headers={"X-Slurm-Attrib-Job-Key": key,
                                                                        "X-Slurm-Attrib-Node": node})
        assert reply.status in (400, 404), (key, node)
    assert server.call("POST", "/v1/node-bundles", body).status == 400  # no headers
    mismatch = server.call("POST", "/v1/node-bundles/orion/5/node-01", body,
                           headers={"X-Slurm-Attrib-Job-Key": "orion_6_0"})
    assert mismatch.status == 400 and "does not match" in mismatch.json()["detail"]
    assert sorted(p.name for p in (server.spool / "nodes").iterdir() if p.name.startswith("orion_1_")) == []


def test_a_hostile_node_bundle_leaves_nothing(server: Server) -> None:
    from .test_untrusted_input import HOSTILE

    reply = server.call("POST", "/v1/node-bundles/orion/4714/node-10", HOSTILE["symlink"])
    assert reply.status == 400
    assert not (server.spool / "nodes" / "orion_4714_0" / "node-10").exists()
    assert sorted(p.name for p in (server.spool / "nodes" / "orion_4714_0").iterdir()) == []


def test_node_bundles_need_a_token_when_no_network_is_trusted(strict_server: Server) -> None:
    body = tar_gz({"syslog/kern.log": b"x\n"})
    assert strict_server.call("POST", "/v1/node-bundles/orion/1/node-01", body).status == 401
    assert strict_server.call("POST", "/v1/node-bundles/orion/1/node-01", body, TOKEN).status == 200


def test_the_collector_sends_its_token_file_and_the_strict_receiver_takes_it(strict_server: Server,
                                                                              tmp_path: Path) -> None:
    """spool.http_token_file: the epilog reads a root-only token and sends it as its bearer token."""
    from slurm_attrib.collect import CollectionReport, EpilogJob, _bearer
    from slurm_attrib.config import Config, SpoolConfig

    token_file = tmp_path / "token"
    token_file.write_text(f"# the node-bundle token\n{TOKEN}\n")
    token_file.chmod(0o600)
    url = strict_server.url + "/v1/node-bundles"
    config = Config(spool=SpoolConfig(http_url=url, http_token_file=str(token_file)))
    report = CollectionReport(job=EpilogJob.from_env({"SLURM_JOB_ID": "4720", "SLURMD_NODENAME": "node-11"}))
    key = job_key("orion", "4720", 0)
    done = deliver(built(tmp_path, "node-11", b"Xid 79\n"), tmp_path / "s", tmp_path / "f", key, "node-11",
                   http_url=url, http_timeout=10, poster=UrllibPoster(), token=_bearer(config, report))
    assert (done.destination, report.problems) == ("http", [])
    assert list(arrived(strict_server.spool, key)) == ["node-11"]
    token_file.chmod(0o644)  # readable by every user: no secret, not sent, and the report says why
    assert _bearer(config, report) == "" and "only its owner can read" in report.problems[0]
