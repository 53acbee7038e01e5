"""`spotrun data get NAME` through the real CLI, from a local HTTP server standing in for the
data set's public home (config.toml's data_mirror): a recipe's missing data names the exact
line; the fetch lands checked in the data folder, resumes a .part, and keeps nothing wrong."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Env
from tests.data_server import serve_folder, shared_data

TEXT = "tinyshakespeare.txt"


def _mirror(env: Env, url: str) -> None:
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "config.toml").write_text(f'data_mirror = "{url}"\n')


def test_missing_text_names_data_get_which_fetches_it(env: Env) -> None:
    source = shared_data()
    refused = env.cli("launch", "shakespeare-fast")
    assert refused.returncode == 2, refused.stderr
    assert "get it with `spotrun data get tinyshakespeare`" in refused.stderr
    assert env.runs() == []  # nothing launched
    listed = env.cli("data", "get", check=True).stdout  # no name: what it knows
    assert "tinyshakespeare" in listed and "raw.githubusercontent.com/karpathy/char-rnn" in listed
    with serve_folder(source) as server:
        _mirror(env, server.url)
        got = env.cli("data", "get", "tinyshakespeare")
        assert got.returncode == 0, got.stderr
        again = env.cli("data", "get", "tinyshakespeare")
    fetched = env.home / "data" / TEXT
    assert fetched.read_bytes() == (source / TEXT).read_bytes()
    assert sorted(p.name for p in fetched.parent.iterdir()) == [TEXT]  # no .part left
    assert f"from {server.url}/{TEXT}" in got.stdout
    assert "already in the data folder" in again.stdout
    assert server.requests == [(f"/{TEXT}", None)]  # the second found it in place
    ready = env.cli("launch", "shakespeare-fast", "--cloud", "local", "--dry-run")
    assert "no such file" not in ready.stderr


def test_data_get_resumes_a_part_and_keeps_nothing_wrong(env: Env, tmp_path: Path) -> None:
    source = shared_data() / TEXT
    data = env.home / "data"
    data.mkdir(parents=True)
    (data / f"{TEXT}.part").write_bytes(source.read_bytes()[:500_000])  # a fetch cut short
    with serve_folder(source.parent) as server:
        _mirror(env, server.url)
        got = env.cli("data", "get", "tinyshakespeare")
    assert got.returncode == 0, got.stderr
    assert server.requests == [(f"/{TEXT}", "bytes=500000-")]
    assert "resumed at byte 500,000" in got.stdout
    assert (data / TEXT).read_bytes() == source.read_bytes()

    (data / TEXT).unlink()
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    body = bytearray(source.read_bytes())
    body[1000] ^= 1  # one bit: the same size, another hash
    (tampered / TEXT).write_bytes(bytes(body))
    with serve_folder(tampered) as server:
        _mirror(env, server.url)
        refused = env.cli("data", "get", "tinyshakespeare")
    assert refused.returncode == 1
    (said,) = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert "nothing was kept" in said
    assert list(data.iterdir()) == []
