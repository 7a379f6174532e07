"""Capture plug-ins: a camera of an installed package's, declared under the entry-point group ``emopipe.captures``,
found by its scheme in this process, in a command, and in the workers of a Ray cluster (which run no code of the
driver's: they know the scheme only because the package is installed where they run)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emopipe.errors import UsageError
from emopipe.io.uris import STREAM_SCHEMES, is_live
from emopipe.registry import Registry

REPO = Path(__file__).resolve().parents[1]
GROUP = "emopipe.captures"

CAMERA_MODULE = '''
"""A still camera for the tests: the photo EMOPIPE_TESTCAMS_IMAGE names, handed over 30 times a second."""
import os
import time

import cv2

from emopipe.errors import SourceUnavailableError


class StillCamera:
    def __init__(self, image):
        self.image = image
        self.next = time.monotonic()

    def read(self):
        self.next += 1 / 30
        time.sleep(max(0.0, self.next - time.monotonic()))  # (a camera's pace, not a wait on the run)
        return True, self.image.copy()

    def get(self, prop):
        return 0.0

    def release(self):
        pass


def open_camera(uri, options):
    if uri.endswith("/absent"):
        raise SourceUnavailableError(f"cannot open the camera {uri}: no such camera")
    image = cv2.imread(os.environ["EMOPIPE_TESTCAMS_IMAGE"])
    return StillCamera(cv2.resize(image, (320, round(320 * image.shape[0] / image.shape[1]))))
'''


def _package(folder: Path, name: str, entries: dict[str, str], module: str | None = None) -> Path:
    """An installed distribution as pip leaves one: ``NAME.dist-info`` with its entry points (and its module)."""
    info = folder / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    if module is not None:
        (folder / f"{name}.py").write_text(module)
    return folder


def test_a_packages_capture_plugin_is_found_by_its_scheme_and_loaded_when_used(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_package(tmp_path, "emopipe_testcams", {"stillcam": "emopipe_testcams:open_camera"},
                                             CAMERA_MODULE)))
    captures: Registry[object] = Registry("capture scheme", {"paced": "somewhere:else"}, plugins=GROUP)
    assert "emopipe_testcams" not in sys.modules
    assert captures.names() == ("paced", "stillcam")  # built-ins first
    assert captures.origins == {"stillcam": "emopipe_testcams"}
    assert "emopipe_testcams" not in sys.modules  # listed without importing it
    opener = captures.get("stillcam")
    assert opener is sys.modules["emopipe_testcams"].open_camera


def test_the_product_registry_takes_an_installed_capture_plugin(tmp_path):
    """emopipe.io.uris.CAPTURES itself, in a fresh process with the package on its path: the scheme is a live source
    and opens with the plug-in's factory."""
    folder = _package(tmp_path, "emopipe_testcams", {"stillcam": "emopipe_testcams:open_camera"}, CAMERA_MODULE)
    probe = ("from emopipe.io.live import capture_opener; from emopipe.io.uris import is_live; "
             "print(is_live('stillcam://door'), capture_opener('stillcam://door').__module__, is_live('nocam://x'))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)])})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "emopipe_testcams", "False"]
    assert not is_live("stillcam://door")  # (this process has no such package)


def test_a_plugin_cannot_take_a_built_in_scheme_an_invalid_one_or_a_malformed_target(tmp_path, monkeypatch, caplog):
    from emopipe.io import uris

    monkeypatch.syspath_prepend(str(_package(tmp_path, "greedy_cams", {
        "rtsp": "greedy_cams:open", "Door_Cam": "greedy_cams:open", "bad": "greedy_cams.open",
        "good": "greedy_cams:open", "paced": "greedy_cams:open"})))
    captures: Registry[object] = Registry("capture scheme", {"paced": "emopipe_paced:open"}, plugins=GROUP,
                                          valid_name=uris.CAPTURES._valid_name)
    with caplog.at_level(logging.WARNING, logger="emopipe.registry"):
        assert captures.names() == ("paced", "good")
    said = caplog.text
    assert "capture scheme 'rtsp' of greedy_cams left out: not a valid name" in said and "rtsp" in STREAM_SCHEMES
    assert "'Door_Cam' of greedy_cams left out: not a valid name" in said
    assert "'bad' of greedy_cams left out: 'greedy_cams.open' is not module:attribute" in said
    assert "'paced' of greedy_cams left out: emopipe has one of that name" in said
    assert captures._all()["paced"] == "emopipe_paced:open"  # the built-in entry stays


def test_a_plugin_that_cannot_load_is_a_usage_error_that_names_its_package(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_package(tmp_path, "broken_cams", {"broken": "broken_cams_missing:open"})))
    captures: Registry[object] = Registry("capture scheme", {}, plugins=GROUP)
    with pytest.raises(UsageError) as raised:
        captures.get("broken")
    message = str(raised.value)
    assert message.startswith(
        "capture scheme 'broken' (a plug-in of broken_cams): cannot load broken_cams_missing:open:")
    assert "ModuleNotFoundError" in message and "\n" not in message


def test_a_name_registered_in_process_is_not_dropped_as_a_clash_with_a_plugin(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_package(tmp_path, "emopipe_testcams", {"stillcam": "emopipe_testcams:open_camera"},
                                             CAMERA_MODULE)))
    captures: Registry[object] = Registry("capture scheme", {}, plugins=GROUP)

    def mine(uri, options):
        raise AssertionError

    captures.register("stillcam", mine)  # a test's own camera of that name: it is the one used
    assert captures.get("stillcam") is mine and captures.origins == {}


# -- the command: plug-in cameras in one process, and over Ray ------------------------------------------------------

def _command_env(tmp_path: Path, shared_dir: Path) -> dict[str, str]:
    folder = _package(tmp_path / "site", "emopipe_testcams", {"stillcam": "emopipe_testcams:open_camera"},
                      CAMERA_MODULE)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)]),
            "EMOPIPE_TESTCAMS_IMAGE": str(shared_dir / "data" / "faces" / "1face.png")}


def _check_fleet(out: Path, cameras: list[str], absent: tuple[str, ...] = ()) -> dict:
    """Each of ``cameras`` ok with its analysed frames' faces in its rows file; each of ``absent`` failed as it said."""
    lines = {e["source"]: e for e in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}
    assert sorted((source, e["status"]) for source, e in lines.items()) == sorted(
        [(c, "ok") for c in cameras] + [(c, "failed") for c in absent])
    for camera in absent:
        assert lines[camera]["error"] == f"cannot open the camera {camera}: no such camera"
    summary = json.loads((out / "summary.json").read_text())
    for camera in (c for c in summary["cameras"] if c["source"] not in absent):
        rows = [json.loads(line) for line in Path(camera["rows_file"]).read_text().splitlines()]
        # two frames taken, the newest analysed (one may be dropped while EmoNet runs on this CPU): a face in each
        assert 1 <= camera["frames"] == camera["faces"] == len(rows) <= 2, camera
        assert {r["source"] for r in rows} == {camera["source"]}
    return summary


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_fleet_of_plugin_cameras_runs_from_the_command_line(tmp_path, shared_dir, checkpoints):
    cameras = ["stillcam://door", "stillcam://hall"]
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "emopipe", *cameras, "stillcam://absent", "-o", str(out), "--format", "jsonl",
         "--max-frames", "2", "--weights", str(checkpoints[8]), "--detector", "blazeface_back", "--models-dir",
         str(shared_dir / "models" / "blazeface"), "--device", "cpu", "--no-progress"],
        cwd=tmp_path, env=_command_env(tmp_path, shared_dir), capture_output=True, text=True, timeout=280)
    assert done.returncode == 9, done.stderr[-3000:]  # (the absent one failed, the others ran)
    _check_fleet(out, cameras, absent=("stillcam://absent",))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ray_workers_open_plugin_cameras_the_driver_never_opened(tmp_path, shared_dir, checkpoints):
    """--ray local: the workers are processes Ray starts; the cameras open there, by the scheme alone."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'emopipe[ray]')")
    if ray.is_initialized():
        pytest.skip("a Ray is already connected in this process")
    cameras = ["stillcam://door", "stillcam://hall"]
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "emopipe", *cameras, "--ray", "local", "--ray-workers", "2", "-o", str(out),
         "--format", "jsonl", "--max-frames", "2", "--weights", str(checkpoints[8]), "--detector", "blazeface_back",
         "--models-dir", str(shared_dir / "models" / "blazeface"), "--device", "cpu", "--no-progress"],
        cwd=tmp_path, env=_command_env(tmp_path, shared_dir), capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = _check_fleet(out, cameras)
    assert sorted(c["worker"] for c in summary["cameras"]) == ["emopipe-cameras-0", "emopipe-cameras-1"]
