"""Where the cluster is already written down, read as the fleet inventory: sparkrun's cluster definitions (the
YAML `sparkrun cluster` writes under ~/.config/sparkrun/clusters/, ClusterDefinition.to_dict of sparkrun
0.4.2) and eugr's launch-cluster config (.env with CLUSTER_NODES, head first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkdoctor.fleet.inventory import InventoryError, load_inventory

SPARKRUN = """\
name: ring4
hosts:
- 192.168.177.11
- 192.168.177.12
- spark-3
- 10.0.0.4
description: four Sparks, switchless ring
user: me
topology: ring
fabric_interfaces:
- '*np1'
env:
  NCCL_IB_SUBNET_AWARE_ROUTING: '1'
"""

EUGR = """\
# launch-cluster.sh --config .env
CLUSTER_NODES="192.168.177.11,192.168.177.12"  # head first
ETH_IF=enp1s0f1np1
IB_IF=rocep1s0f1,roceP2p1s0f1
"""


def test_a_sparkrun_cluster_definition_is_an_inventory(tmp_path):
    path = tmp_path / "ring4.yaml"
    path.write_text(SPARKRUN)
    nodes = load_inventory(path, "/opt/venv/bin/python", None, "docker")
    assert [n.name for n in nodes] == ["me@192.168.177.11", "me@192.168.177.12", "me@spark-3", "me@10.0.0.4"]
    assert {n.python for n in nodes} == {"/opt/venv/bin/python"}


def test_sparkrun_cluster_by_name_and_the_default_one(tmp_path, monkeypatch):
    clusters = tmp_path / "sparkrun" / "clusters"
    clusters.mkdir(parents=True)
    (clusters / "ring4.yaml").write_text(SPARKRUN)
    (clusters / "pair.yaml").write_text("name: pair\nhosts: [a, b]\n")
    (clusters / ".default").write_text("pair\n")
    monkeypatch.setenv("SPARKRUN_CONFIG_DIR", str(tmp_path / "sparkrun"))
    assert len(load_inventory(Path("sparkrun:ring4"), None, None, "docker")) == 4
    assert [n.name for n in load_inventory(Path("sparkrun:"), None, None, "docker")] == ["a", "b"]
    with pytest.raises(InventoryError, match="no such sparkrun cluster"):
        load_inventory(Path("sparkrun:nope"), None, None, "docker")
    with pytest.raises(InventoryError, match="not a cluster name"):
        load_inventory(Path("sparkrun:../etc/passwd"), None, None, "docker")


def test_eugr_cluster_nodes_is_an_inventory(tmp_path):
    for name in (".env", "cluster.conf"):  # any file with a CLUSTER_NODES= line
        path = tmp_path / name
        path.write_text(EUGR)
        assert [n.name for n in load_inventory(path, None, "vllm_node", "docker")] == ["192.168.177.11", "192.168.177.12"]
    (tmp_path / "last.env").write_text("CLUSTER_NODES=a,b\nexport CLUSTER_NODES='a,b,c'\n")
    assert len(load_inventory(tmp_path / "last.env", None, None, "docker")) == 3  # the last assignment wins


@pytest.mark.parametrize("name,content,words", [
    ("c.yaml", "name: x\n", "lists its hosts"),
    ("c.yaml", "hosts: [a, '-oProxyCommand=x']\n", "hosts[1]"),
    ("c.yaml", "hosts: [a]\nuser: 'a b'\n", "not an ssh user"),
    ("c.yaml", "hosts: [spark-1]\nuser: '-F'\n", "not an ssh user"),  # `-F@spark-1`: ssh's -F with file ./@spark-1
    ("c.yaml", "hosts: [spark-1]\nuser: '-oProxyCommand=x'\n", "not an ssh user"),
    ("c.yaml", "hosts: [a, a]\n", "named twice"),
    ("c.yaml", "hosts: [a\n", "c.yaml"),
    ("x.env", "ETH_IF=enp1s0f1np1\n", "no CLUSTER_NODES"),
    ("x.env", "CLUSTER_NODES=\n", "CLUSTER_NODES is empty"),
    ("x.env", "CLUSTER_NODES=a;rm -rf /\n", "not an ssh destination"),
    # tomllib raises RecursionError and ValueError past its own errors: each was an internal error
    ("f.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n[[node]]\nhost = 'a'\n", "not usable TOML: nested too deeply"),
    ("f.toml", "x = " + "{a=" * 5_000 + "1" + "}" * 5_000 + "\n", "not usable TOML: nested too deeply"),
    ("f.toml", "x = " + "9" * 5_000 + "\n[[node]]\nhost = 'a'\n", "not usable TOML: Exceeds the limit"),
])
def test_bad_cluster_files_are_one_line(tmp_path, name, content, words):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InventoryError) as caught:
        load_inventory(path, None, None, "docker")
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_cluster_file_yaml_refuses_names_the_file_once_and_no_recipe(tmp_path):
    """Bad YAML and a billion-laughs cluster definition: the line names the file once (not `c.yaml: c.yaml: line 1`)
    and does not call the inventory a recipe."""
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(5)]
    cases = {"bad.yaml": "hosts: [a\n", "laughs.yaml": "\n".join(levels) + "\nhosts: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n"}
    for name, content in cases.items():
        path = tmp_path / name
        path.write_text(content)
        with pytest.raises(InventoryError) as caught:
            load_inventory(path, None, None, "docker")
        line = str(caught.value)
        assert line.count(name) == 1 and "recipe" not in line, line


@pytest.mark.parametrize(("name", "text"), [
    ("nodes.toml", '[[node]]\nhost = "spark-1"\n\n[[node]]\nhost = "spark-2"\n'),
    ("hosts.txt", "spark-1\nspark-2  # the second\n"),
    (".env", 'CLUSTER_NODES="spark-1,spark-2"\n'),
    ("ring.yaml", "name: ring\nhosts:\n- spark-1\n- spark-2\n"),
])
def test_an_inventory_begun_with_a_byte_order_mark_reads_as_without_it(tmp_path, name, text):
    """Windows editors begin a file with a UTF-8 byte-order mark: the TOML inventory was refused as "Invalid statement",
    and in a host list the mark became part of the first host's name."""
    (plain := tmp_path / "plain").mkdir()
    (marked := tmp_path / "marked").mkdir()
    (plain / name).write_text(text)
    (marked / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
    expected = [n.name for n in load_inventory(plain / name, None, None, "docker")]
    assert expected == ["spark-1", "spark-2"]
    assert [n.name for n in load_inventory(marked / name, None, None, "docker")] == expected
