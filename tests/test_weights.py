"""The weights manager against a real HTTP server on 127.0.0.1: downloads are verified and atomic."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from emopipe.errors import WeightsError
from emopipe.model import places, weights

PAYLOAD = os.urandom(300_000)
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[dict[str, int]] = {}

    def do_GET(self) -> None:
        type(self).hits[self.path] = type(self).hits.get(self.path, 0) + 1
        if self.path == "/missing.bin":
            self.send_error(404)
            return
        body = PAYLOAD[:-1] + b"X" if self.path == "/tampered.bin" else PAYLOAD
        self.send_response(200)
        if self.path == "/unsized.bin":  # no Content-Length: the body ends when the server hangs up
            self.end_headers()
            with contextlib.suppress(OSError):  # (the client hanging up first)
                for _ in range(20):  # 6 MB, far more than the manifest's size
                    self.wfile.write(PAYLOAD)
            return
        self.send_header("Content-Length", str(len(PAYLOAD)))
        self.end_headers()
        if self.path == "/truncated.bin":
            self.wfile.write(body[: len(body) // 3])  # then hang up early
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.hits = {}
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _spec(url: str, **overrides: object) -> weights.WeightSpec:
    fields = {"name": "toy", "file": "toy.bin", "url": url, "licence": "test licence", "sha256": DIGEST,
              "size": len(PAYLOAD)}
    fields.update(overrides)
    return weights.WeightSpec(**fields)  # type: ignore[arg-type]


def _no_leftovers(directory: Path) -> bool:
    return not [p for p in directory.iterdir() if p.name.endswith(".part")]


def test_good_download_is_verified_and_atomic(server, tmp_path, caplog):
    umask = os.umask(0o022)
    try:
        path = weights.download(_spec(f"{server}/toy.bin"), tmp_path, progress=False)
    finally:
        os.umask(umask)
    assert path == tmp_path / "toy.bin"
    assert path.read_bytes() == PAYLOAD
    assert _no_leftovers(tmp_path)
    assert "test licence" in caplog.text  # the licence is shown when the file is fetched
    # readable as any new file is (another user's worker reads a shared models volume); mkstemp made it 0600
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_wrong_hash_is_discarded_and_names_both_hashes(server, tmp_path):
    with pytest.raises(WeightsError) as info:
        weights.download(_spec(f"{server}/tampered.bin"), tmp_path, progress=False)
    message = str(info.value)
    assert DIGEST in message and hashlib.sha256(PAYLOAD[:-1] + b"X").hexdigest() in message
    assert not (tmp_path / "toy.bin").exists() and _no_leftovers(tmp_path)


def test_truncated_transfer_leaves_nothing_behind(server, tmp_path):
    with pytest.raises(WeightsError) as info:
        weights.download(_spec(f"{server}/truncated.bin"), tmp_path, progress=False)
    assert str(tmp_path / "toy.bin") in str(info.value)  # says where to put the file by hand
    assert not (tmp_path / "toy.bin").exists() and _no_leftovers(tmp_path)


KILLED_DOWNLOAD = """
import os, signal, sys
from pathlib import Path
from emopipe.model import places, weights

chunks = weights._chunks

def killed_after_the_first_chunk(response):
    yield next(chunks(response))
    os.kill(os.getpid(), signal.SIGKILL)  # (no clean-up runs, as with kill -9)

weights._chunks = killed_after_the_first_chunk
url, digest, size, directory = sys.argv[1:]
spec = weights.WeightSpec(name="toy", file="toy.bin", url=url, licence="test licence", sha256=digest, size=int(size))
weights.download(spec, Path(directory), progress=False)
"""


def test_what_killed_downloads_left_goes_with_the_next_download(server, tmp_path):
    # a download killed (SIGKILL, out of memory) left its temporary file, and each one killed another: they
    # accumulated (a weights file each) in the models directory
    for _ in range(2):
        killed = subprocess.run([sys.executable, "-c", KILLED_DOWNLOAD, f"{server}/toy.bin", DIGEST, str(len(PAYLOAD)),
                                 str(tmp_path)], capture_output=True, text=True, timeout=120,
                                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [p.name for p in tmp_path.iterdir()] == [".toy.bin.0.part"]
    assert weights.download(_spec(f"{server}/toy.bin"), tmp_path, progress=False).read_bytes() == PAYLOAD
    assert sorted(p.name for p in tmp_path.iterdir()) == [".toy.bin.verified", "toy.bin"]


def test_server_down_gives_url_and_exact_path(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    url = f"http://127.0.0.1:{port}/toy.bin"
    with pytest.raises(WeightsError) as info:
        weights.download(_spec(url), tmp_path, progress=False)
    message = str(info.value)
    assert url in message and str(tmp_path / "toy.bin") in message and "\n" not in message


def test_http_error_is_reported(server, tmp_path):
    with pytest.raises(WeightsError, match="HTTP 404"):
        weights.download(_spec(f"{server}/missing.bin"), tmp_path, progress=False)


def test_a_body_without_length_is_stopped_once_past_the_manifests_size(server, tmp_path, monkeypatch):
    monkeypatch.setattr(weights, "_CHUNK", 64 * 1024)
    with pytest.raises(WeightsError) as info:
        weights.download(_spec(f"{server}/unsized.bin"), tmp_path, progress=False)
    assert f"sent more than the {len(PAYLOAD)} bytes expected" in str(info.value)
    assert not (tmp_path / "toy.bin").exists() and _no_leftovers(tmp_path)


def test_a_directory_in_the_files_place_is_said_before_downloading(server, tmp_path):
    (tmp_path / "toy.bin").mkdir()
    with pytest.raises(WeightsError, match=r"toy\.bin is a directory, where the toy weights file must go"):
        weights.download(_spec(f"{server}/toy.bin"), tmp_path, progress=False)
    assert _Handler.hits == {} and _no_leftovers(tmp_path)  # nothing was downloaded for nothing


@pytest.mark.parametrize("content", ["[1, 2]", '"toy"', "3"])
def test_a_manifest_that_is_no_json_object_is_a_weights_error(tmp_path, monkeypatch, content):
    (tmp_path / "manifest.json").write_text(content)
    monkeypatch.setenv("EMOPIPE_MANIFEST", str(tmp_path / "manifest.json"))
    with pytest.raises(WeightsError, match=r"cannot read the weights manifest .*: a JSON object of model name"):
        weights.load_manifest()


def _manifest(tmp_path: Path, server: str, monkeypatch) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"toy": {"file": "toy.bin", "url": f"{server}/toy.bin", "sha256": DIGEST,
                                            "size": len(PAYLOAD), "licence": "test licence"}}))
    monkeypatch.setenv("EMOPIPE_MANIFEST", str(manifest))


def test_no_progress_bar_is_drawn_where_stderr_is_no_terminal(server, tmp_path, capsys):
    # (was: tqdm's redraws in a log file or a CI job's output, one line each)
    assert weights.download(_spec(f"{server}/toy.bin"), tmp_path, progress=True).read_bytes() == PAYLOAD
    assert "toy.bin" not in capsys.readouterr().err


def test_existing_verified_file_is_not_downloaded_again(server, tmp_path, monkeypatch):
    _manifest(tmp_path, server, monkeypatch)
    home = tmp_path / "home"
    first = weights.ensure("toy", home, progress=False)
    second = weights.ensure("toy", home, progress=False)
    assert first == second and _Handler.hits.get("/toy.bin") == 1


def test_a_file_is_hashed_once_a_process_while_it_is_unchanged(tmp_path, monkeypatch):
    """A run reports the weights' SHA-256 and keys its caches by it: one hash of the file per process, not one per
    use; a changed file (size or modification time) is hashed again."""
    path = tmp_path / "w.pth"
    path.write_bytes(b"one" * 1000)
    opened: list[Path] = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: opened.append(Path(p)) or real_open(p, *a, **k))
    first = weights.sha256_of(path)
    assert weights.sha256_of(path) == first == hashlib.sha256(b"one" * 1000).hexdigest()
    assert opened.count(path) == 1
    path.write_bytes(b"two" * 1001)
    assert weights.sha256_of(path) == hashlib.sha256(b"two" * 1001).hexdigest() and opened.count(path) == 2


def test_a_verified_files_digest_is_taken_from_its_check(server, tmp_path, monkeypatch):
    _manifest(tmp_path, server, monkeypatch)
    home = tmp_path / "home"
    path = weights.ensure("toy", home, progress=False)
    monkeypatch.setattr(weights, "_digests", {})  # (a later process: only the check's record is left)
    monkeypatch.setattr(weights.hashlib, "sha256", lambda: pytest.fail("hashed again"))
    assert weights.ensure("toy", home, progress=False) == path
    assert weights.sha256_of(path) == DIGEST


def test_seeded_file_is_found_by_name_and_checked(server, tmp_path, monkeypatch):
    _manifest(tmp_path, server, monkeypatch)
    home = tmp_path / "home"
    home.mkdir()
    (home / "toy.bin").write_bytes(PAYLOAD)  # copied in by hand, as on an offline machine
    assert weights.ensure("toy", home, allow_download=False) == home / "toy.bin"
    assert not _Handler.hits
    (home / "toy.bin").write_bytes(PAYLOAD[:1000])  # a damaged copy is refused, not silently used
    with pytest.raises(WeightsError, match="does not match the manifest"):
        weights.ensure("toy", home, allow_download=False)


def test_offline_without_download_names_url_and_path(tmp_path, monkeypatch, server):
    _manifest(tmp_path, server, monkeypatch)
    with pytest.raises(WeightsError) as info:
        weights.ensure("toy", tmp_path / "empty", allow_download=False)
    assert f"{server}/toy.bin" in str(info.value) and str(tmp_path / "empty" / "toy.bin") in str(info.value)


def test_sha256_prefix_entries(server, tmp_path):
    spec = _spec(f"{server}/toy.bin", sha256=None, sha256_prefix=DIGEST[:10], size=None)
    assert weights.download(spec, tmp_path, progress=False).read_bytes() == PAYLOAD
    bad = _spec(f"{server}/toy.bin", sha256=None, sha256_prefix="0123456789", size=None)
    with pytest.raises(WeightsError, match="0123456789"):
        weights.download(bad, tmp_path / "other", progress=False)


def test_models_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("EMOPIPE_HOME", raising=False)
    checkout = Path(weights.__file__).resolve().parents[2] / "models"
    assert weights.models_dir() == checkout  # running from this checkout
    monkeypatch.setenv("EMOPIPE_HOME", str(tmp_path / "env"))
    assert weights.models_dir() == tmp_path / "env"
    assert weights.models_dir(tmp_path / "flag") == tmp_path / "flag"


def test_manifest_lists_the_models_the_product_uses():
    entries = weights.load_manifest()
    assert {"emonet_8", "emonet_5", "s3fd", "blazeface_front", "blazeface_back"} <= set(entries)
    assert entries["emonet_8"].sha256 == "52918cffba56f31886e6959f6837266a5f7ef5c0a552baf4c6dabe1e8fa9bc97"
    assert entries["emonet_5"].size == 56085615 and entries["emonet_5"].classes == 5
    assert all("CC BY-NC-ND" in entries[n].licence for n in ("emonet_8", "emonet_5"))


def test_shared_blazeface_files_verify_against_the_manifest(shared_dir):
    for name in ("blazeface_front", "blazeface_back", "blazeface_front_anchors"):
        spec = weights.spec(name)
        assert weights.status(spec, shared_dir / "models" / "blazeface").state == "verified"


def test_user_file_is_used_without_a_hash(tmp_path, caplog):
    f = tmp_path / "mine.pth"
    f.write_bytes(b"abc")
    assert weights.user_file(f) == f
    assert "not checked against the manifest" in caplog.text
    with pytest.raises(WeightsError, match="not found"):
        weights.user_file(tmp_path / "nope.pth")


def test_models_cli_fetch_and_list(server, tmp_path, monkeypatch):
    _manifest(tmp_path, server, monkeypatch)
    env = {**os.environ, "EMOPIPE_HOME": str(tmp_path / "home")}
    fetch = subprocess.run([sys.executable, "-m", "emopipe", "models", "fetch", "toy", "--no-progress"],
                           capture_output=True, text=True, env=env)
    assert fetch.returncode == 0, fetch.stderr
    assert (tmp_path / "home" / "toy.bin").read_bytes() == PAYLOAD
    listing = subprocess.run([sys.executable, "-m", "emopipe", "models", "list"], capture_output=True, text=True,
                             env=env)
    assert "toy" in listing.stdout and "verified" in listing.stdout
    unknown = subprocess.run([sys.executable, "-m", "emopipe", "models", "fetch", "nope"], capture_output=True,
                             text=True, env=env)
    assert unknown.returncode == 2 and "unknown model" in unknown.stderr and "Traceback" not in unknown.stderr
    # --models-dir after the action too (was: "unrecognized arguments", exit 2); before it, as it was
    for args in (["list", "--models-dir", str(tmp_path / "home")], ["--models-dir", str(tmp_path / "home"), "list"]):
        listing = subprocess.run([sys.executable, "-m", "emopipe", "models", *args], capture_output=True, text=True)
        assert listing.returncode == 0, listing.stderr
        assert f"models directory: {tmp_path / 'home'}" in listing.stdout and "verified" in listing.stdout
    # a file in the models directory's place: said, exit 6 (was: every model "missing", exit 0)
    (tmp_path / "afile").write_bytes(b"x")
    listing = subprocess.run([sys.executable, "-m", "emopipe", "models", "list", "--models-dir",
                              str(tmp_path / "afile")], capture_output=True, text=True)
    assert listing.returncode == 6 and listing.stdout == "", listing.stderr
    assert listing.stderr.strip().splitlines()[-1] == (f"emopipe: error: the models directory {tmp_path / 'afile'} is "
                                                       "not a directory: a file is in its place")


def test_models_cli_offline_exit_code(tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"toy": {"file": "toy.bin", "url": "http://127.0.0.1:9/toy.bin",
                                            "sha256": DIGEST, "licence": "x"}}))
    env = {**os.environ, "EMOPIPE_HOME": str(tmp_path / "home"), "EMOPIPE_MANIFEST": str(manifest)}
    out = subprocess.run([sys.executable, "-m", "emopipe", "models", "fetch", "toy", "--no-progress"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 6
    assert "http://127.0.0.1:9/toy.bin" in out.stderr and str(tmp_path / "home" / "toy.bin") in out.stderr
    assert "Traceback" not in out.stderr


def test_models_cli_fetch_tries_every_model_and_names_each_failure(server, tmp_path):
    entry = {"sha256": DIGEST, "size": len(PAYLOAD), "licence": "test licence"}
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"gone": {**entry, "file": "gone.bin", "url": f"{server}/missing.bin"},
                                    "bad": {**entry, "file": "bad.bin", "url": f"{server}/tampered.bin"},
                                    "toy": {**entry, "file": "toy.bin", "url": f"{server}/toy.bin"}}))
    env = {**os.environ, "EMOPIPE_HOME": str(tmp_path / "home"), "EMOPIPE_MANIFEST": str(manifest)}
    out = subprocess.run([sys.executable, "-m", "emopipe", "models", "fetch", "--no-progress"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 6, out.stderr
    assert (tmp_path / "home" / "toy.bin").read_bytes() == PAYLOAD  # the one after the failures was fetched
    errors = [line for line in out.stderr.splitlines() if line.startswith("emopipe: error:")]
    assert len(errors) == 3 and "HTTP 404" in errors[0] and "sha256 mismatch" in errors[1], out.stderr
    assert errors[2] == "emopipe: error: 2 of 3 models not fetched (gone, bad): see above"
    assert out.stdout.strip() == f"toy: {tmp_path / 'home' / 'toy.bin'} (verified)" and "Traceback" not in out.stderr


def test_a_full_disk_during_the_download_is_said_as_the_models_directorys_not_the_servers(server, tmp_path,
                                                                                         monkeypatch):
    # a write error while saving (disk full, quota) was reported as "cannot download toy from URL (No space left on
    # device); download URL yourself and put it at …": a failed download, with advice that cannot help
    real = weights.written_whole

    @contextlib.contextmanager
    def full_disk(path, **kwargs):
        with real(path, **kwargs) as out:
            def write(_data):
                raise OSError(28, "No space left on device")
            monkeypatch.setattr(out, "write", write)
            yield out

    monkeypatch.setattr(weights, "written_whole", full_disk)
    with pytest.raises(WeightsError) as info:
        weights.download(_spec(f"{server}/toy.bin"), tmp_path, progress=False)
    message = str(info.value)
    assert message.startswith(f"cannot write to the models directory {tmp_path}: No space left on device"), message
    assert "cannot download" not in message and "yourself" not in message
    assert not (tmp_path / "toy.bin").exists() and _no_leftovers(tmp_path)


@pytest.mark.parametrize("below", [False, True])
def test_a_file_in_the_models_directorys_place_is_said_so(server, tmp_path, below):
    # was "cannot write to the models directory DIR: File exists" (or "Not a directory")
    (tmp_path / "models").write_bytes(b"not a folder")
    directory = tmp_path / "models" / "sub" if below else tmp_path / "models"
    with pytest.raises(WeightsError, match=rf"the models directory {directory} is not a directory: a file is in its "
                                           rf"place.*--models-dir"):
        weights.download(_spec(f"{server}/toy.bin"), directory, progress=False)
    assert _Handler.hits == {} and (tmp_path / "models").read_bytes() == b"not a folder"


def test_user_file_that_is_a_directory_is_said_so(tmp_path):
    # was "weights file not found: DIR", of a folder that is there
    with pytest.raises(WeightsError, match=rf"weights file {tmp_path} is a directory: give the checkpoint file"):
        weights.user_file(tmp_path)


def test_a_seeded_file_of_another_model_is_named(tmp_path, monkeypatch):
    # the 5-class weights copied in under the 8-class name: "does not match the manifest (… found HASH)" did not say
    # the file is another model's
    other = b"the other model"
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({
        "toy": {"file": "toy.bin", "url": "http://127.0.0.1:9/toy.bin", "sha256": DIGEST, "licence": "x"},
        "toy_5": {"file": "toy_5.bin", "url": "http://127.0.0.1:9/toy_5.bin",
                  "sha256": hashlib.sha256(other).hexdigest(), "licence": "x"}}))
    monkeypatch.setenv("EMOPIPE_MANIFEST", str(manifest))
    home = tmp_path / "home"
    home.mkdir()
    (home / "toy.bin").write_bytes(other)
    with pytest.raises(WeightsError, match=rf"found {hashlib.sha256(other).hexdigest()}, the toy_5 file\): delete it"):
        weights.ensure("toy", home, allow_download=False)
    (home / "toy.bin").write_bytes(b"nobody's")
    with pytest.raises(WeightsError, match=r"found [0-9a-f]{64}\): delete it"):
        weights.ensure("toy", home, allow_download=False)


def test_a_mirrors_manifest_with_the_hash_in_capitals_verifies(server, tmp_path, monkeypatch):
    # (was: every download refused, "sha256 mismatch: expected 9F2C…, found 9f2c…", the same hash)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"toy": {"file": "toy.bin", "url": f"{server}/toy.bin", "sha256": DIGEST.upper(),
                                            "size": len(PAYLOAD), "licence": "test licence"}}))
    monkeypatch.setenv("EMOPIPE_MANIFEST", str(manifest))
    assert weights.ensure("toy", tmp_path / "home", progress=False).read_bytes() == PAYLOAD
    assert weights.status(weights.spec("toy"), tmp_path / "home").state == "verified"


@pytest.mark.parametrize(("field", "value", "message"), [
    ("size", str(len(PAYLOAD)), "size must be a whole number ≥ 1, not '300000'"),  # (was a TypeError mid-download)
    ("size", 0, "size must be a whole number ≥ 1, not 0"),
    ("sha256", "not-a-hash", "sha256 must be hexadecimal digits"),
    ("sha256", DIGEST[:40], "sha256 must have 64 hexadecimal digits, not 40"),
    ("url", None, "url must be a string"),
], ids=["size as text", "size 0", "sha256 not hex", "sha256 short", "url null"])  # (ids: PAYLOAD is random)
def test_a_manifest_entry_of_the_wrong_types_is_said_before_downloading(server, tmp_path, monkeypatch, field, value,
                                                                        message):
    entry = {"file": "toy.bin", "url": f"{server}/toy.bin", "sha256": DIGEST, "size": len(PAYLOAD), "licence": "x"}
    entry[field] = value
    (tmp_path / "manifest.json").write_text(json.dumps({"toy": entry}))
    monkeypatch.setenv("EMOPIPE_MANIFEST", str(tmp_path / "manifest.json"))
    with pytest.raises(WeightsError, match=rf"cannot read the weights manifest .*: manifest entry 'toy': {message}"):
        weights.ensure("toy", tmp_path / "home", progress=False)
    assert _Handler.hits == {}


@pytest.mark.parametrize("file", ["../escaped.bin", "/tmp/escaped.bin", "sub/toy.bin", "..", "", "a\\b.bin"])
def test_a_manifest_file_that_is_no_plain_name_is_refused_before_downloading(server, tmp_path, monkeypatch, file):
    # (was: a mirror's manifest with "file": "../escaped.bin" downloaded it beside the models directory, "verified")
    entry = {"file": file, "url": f"{server}/toy.bin", "sha256": DIGEST, "size": len(PAYLOAD), "licence": "x"}
    (tmp_path / "manifest.json").write_text(json.dumps({"toy": entry}))
    monkeypatch.setenv("EMOPIPE_MANIFEST", str(tmp_path / "manifest.json"))
    with pytest.raises(WeightsError, match=r"manifest entry 'toy': file must be a plain file name"):
        weights.ensure("toy", tmp_path / "home" / "models", progress=False)
    assert _Handler.hits == {} and not (tmp_path / "home").exists() and not (tmp_path / "escaped.bin").exists()


@pytest.mark.parametrize(("entry", "message"), [
    ({"url": "u", "sha256": DIGEST}, "manifest entry 'toy' lacks file, licence"),
    ({"file": "toy.bin", "url": "u", "sha256": DIGEST, "licence": "x", "sha512": "00"},
     "manifest entry 'toy' has unknown field.s. sha512; known: "),
    ("toy.bin", "manifest entry 'toy' must be a JSON object, not str"),
], ids=["missing fields", "unknown field", "not an object"])
def test_a_manifest_entry_missing_or_unknown_fields_is_said_by_name(tmp_path, monkeypatch, entry, message):
    # (was: "WeightSpec.__init__() missing 2 required positional arguments: 'file' and 'licence'")
    (tmp_path / "manifest.json").write_text(json.dumps({"toy": entry}))
    monkeypatch.setenv("EMOPIPE_MANIFEST", str(tmp_path / "manifest.json"))
    with pytest.raises(WeightsError, match=rf"cannot read the weights manifest .*: {message}"):
        weights.load_manifest()


def test_a_relative_xdg_cache_home_is_ignored(tmp_path, monkeypatch):
    # The XDG spec: relative paths in these variables are invalid. (Was: the weights went to ./relcache/emopipe under
    # whatever folder the command ran in — a new download for each.)
    monkeypatch.setattr(places, "CHECKOUT_MODELS", tmp_path / "no-checkout" / "models")  # as from a wheel
    monkeypatch.delenv("EMOPIPE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relcache")
    assert weights.models_dir() == tmp_path / "home" / ".cache" / "emopipe"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert weights.models_dir() == tmp_path / "home" / ".cache" / "emopipe"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert weights.models_dir() == tmp_path / "xdg" / "emopipe"
