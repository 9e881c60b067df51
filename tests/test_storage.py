"""kraftctl format and the storage checks a node makes before it starts."""

import subprocess
import sys

import pytest

from kraft.server_config import ServerConfig
from kraft.storage import StorageError, check_storage, format_storage, new_uuid_string, parse_uuid_string


def write_config(tmp_path, node_id=1, extra=""):
    path = tmp_path / f"node{node_id}.properties"
    path.write_text(
        "process.roles=broker,controller\n"
        f"node.id={node_id}\n"
        f"controller.quorum.voters={node_id}@127.0.0.1:19093\n"
        "listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\n"
        "controller.listener.names=CONTROLLER\n"
        f"log.dirs={tmp_path}/data-a,{tmp_path}/data-b\n"
        f"metadata.log.dir={tmp_path}/meta\n" + extra
    )
    return path


def kraftctl(*args):
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, timeout=60)


def test_uuid_strings():
    cid = new_uuid_string()
    assert len(cid) == 22 and parse_uuid_string(cid)
    with pytest.raises(ValueError, match="base64url"):
        parse_uuid_string("not-a-uuid")


def test_format_then_check_and_refuse_reformat(tmp_path):
    config = ServerConfig.load(write_config(tmp_path))
    cid = new_uuid_string()
    written = format_storage(config, cid)
    assert sorted(p.name for p in written) == ["data-a", "data-b", "meta"]
    assert check_storage(config) == cid
    meta = (tmp_path / "meta" / "meta.properties").read_text()
    assert f"cluster.id={cid}" in meta and "node.id=1" in meta and "version=1" in meta
    with pytest.raises(StorageError, match="already formatted"):
        format_storage(config, new_uuid_string())
    assert format_storage(config, new_uuid_string(), ignore_formatted=True) == []
    assert check_storage(config) == cid  # untouched


def test_check_refuses_unformatted_and_mismatched(tmp_path):
    config = ServerConfig.load(write_config(tmp_path))
    with pytest.raises(StorageError, match="not formatted"):
        check_storage(config)
    format_storage(config, new_uuid_string())
    other = ServerConfig.load(write_config(tmp_path, node_id=2))
    with pytest.raises(StorageError, match="belongs to node.id 1"):
        check_storage(other)
    # One directory re-formatted for another cluster: the node must refuse to start.
    (tmp_path / "data-b" / "meta.properties").unlink()
    format_storage(config, new_uuid_string(), ignore_formatted=True)
    with pytest.raises(StorageError, match="different clusters"):
        check_storage(config)


def test_kraftctl_format_command(tmp_path):
    path = write_config(tmp_path)
    cid = kraftctl("random-uuid").stdout.strip()
    first = kraftctl("format", "--config", str(path), "--cluster-id", cid)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("Formatting") == 3
    again = kraftctl("format", "--config", str(path), "--cluster-id", cid)
    assert again.returncode == 1 and "already formatted" in again.stderr
    bad = kraftctl("format", "--config", str(path), "--cluster-id", "xyz")
    assert bad.returncode == 1 and "--cluster-id" in bad.stderr
    typo = kraftctl("format", "--config", str(path), "--cluster-id", cid, "--override", "node.idd=2")
    assert typo.returncode == 1 and "node.idd: unknown configuration key" in typo.stderr
    missing = kraftctl("format", "--config", str(tmp_path / "nope.properties"), "--cluster-id", cid)
    assert missing.returncode == 1 and "cannot read" in missing.stderr
    for result in (again, bad, typo, missing):
        assert "Traceback" not in result.stderr


def test_initial_controllers_are_parsed_as_kafka_storage_format_takes_them():
    from kraft.quorum_bootstrap import QuorumBootstrapError, parse_initial_controllers

    dir_id = new_uuid_string()
    voters = parse_initial_controllers(f"1@localhost:9093:{dir_id},2@[::1]:9094:{dir_id}")
    assert [(v.node_id, v.host, v.port) for v in voters] == [(1, "localhost", 9093), (2, "::1", 9094)]
    for bad, why in ((f"1@localhost:{dir_id}", "is not id@host:port:directory-id"),
                     (f"1@localhost:70000:{dir_id}", "port out of range"),
                     (f"1@a:1:{dir_id},1@b:2:{dir_id}", "named twice"),
                     ("1@localhost:9093:notauuidnotauuidnotau", "1@localhost:9093:notauuidnotauuidnotau")):
        with pytest.raises(QuorumBootstrapError, match=why):
            parse_initial_controllers(bad)
