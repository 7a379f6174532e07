"""A many-source run's plan and its end, apart from the pipeline: the sources, their output files, the manifest,
``--resume``; the run's summary.json and ``--report`` once every source has its line. A camera fleet's plan too
(:func:`plan_fleet`; :mod:`emopipe.pipeline.fleet` runs it).

It loads no PyTorch, so a Ray driver (:mod:`emopipe.cluster`, :mod:`emopipe.cluster_cameras`) plans and finishes a
run while only its workers load the engines: with workers warm from an earlier run (``--ray-keep-warm``) the driver's
planning is the run's start.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from emopipe.config import (
    FILE_DETECTOR,
    VIDEO_SUFFIXES,
    RunConfig,
    StrPath,
    Written,
    path_items,
    refuse_inputs,
    video_container,
)
from emopipe.errors import (
    INTERRUPTED_EXIT_CODE,
    SOME_SOURCES_FAILED_EXIT_CODE,
    OutputError,
    SourceUnavailableError,
    UsageError,
)
from emopipe.io.encode import choose_ffmpeg
from emopipe.io.inputs import expand_inputs, warn_linked
from emopipe.io.records import (
    InputFiles,
    ensure_writable,
    hold_folder,
    hold_outputs,
    lock_path,
    partial_path,
    refuse_outputs_in_use,
    text_name,
)
from emopipe.io.uris import is_live, redact_uri
from emopipe.pipeline.archive import (
    MANIFEST,
    RUN_SUMMARY,
    STATUSES,
    Manifest,
    PlannedSource,
    SourceResult,
    file_facts,
    plan_outputs,
    write_run_summary,
)
from emopipe.pipeline.summary import RunSummary

logger = logging.getLogger(__name__)

MANY_SOURCES = "many-sources.mp4"  # the per-source options of a many-source run: resolved as for a file of this name


def many_config(config: RunConfig, device_type: str) -> RunConfig:
    """The options each source of a many-source run gets, resolved for ``device_type`` (``cuda`` or ``cpu``) as for a
    video file (the output folder is no rows file: left out)."""
    return replace(config, source=MANY_SOURCES, webcam=None, output=None, summary=None).resolved(device_type)


def annotated_container(annotate: str, what: str = "several sources", file_flag: str = "--annotate") -> str:
    """``--annotate`` of a many-source run (a fleet's ``--record``): the container of every source's video (``mp4``,
    ``.mkv``…), as a suffix; each source's video goes beside its rows (``NAME.annotated.mp4``)."""
    suffix = video_container(annotate)
    if suffix is None:
        *others, last = (s.lstrip(".") for s in VIDEO_SUFFIXES)
        raise UsageError(f"{file_flag} {annotate}: with {what}, give the videos' container "
                         f"({', '.join(others)} or {last}): each one's annotated video goes beside its rows in "
                         f"the -o folder, as NAME.annotated.{others[0]}")
    return suffix


# The options that shape a source's results (which frames, which faces, what each row holds, the file's format):
# a run's manifest lines record those given otherwise than by default, and --resume refuses to finish a run with
# other ones (it skipped the done sources and wrote the rest otherwise: a folder of mixed results, the old rows
# file of another format left beside the new; QA pass, session 39). Not the engine's (device, precision, batch):
# a run resumed on another machine gives the same results within a precision's rounding.
RESULT_OPTIONS = ("format", "start", "end", "max_frames", "detector", "detect_size", "detect_every", "threshold",
                  "min_face", "max_faces", "margin", "classes", "landmarks", "smooth")


def result_options(given: RunConfig) -> dict[str, Any]:
    """``given``'s :data:`RESULT_OPTIONS` that are not the defaults, and the format, as a manifest line records them
    (a default named — ``--detector sfd`` — is a default: the same results as a run that named none)."""
    return _not_defaults({name: getattr(given, name) for name in RESULT_OPTIONS})


def _not_defaults(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` less those a run given none resolves to (the format kept: a rows file's is always said)."""
    default = RunConfig()
    resolved = {"format": "csv", "detector": FILE_DETECTOR}  # (what None resolves to for every source a run holds)
    chosen = {name: value if value is not None else resolved.get(name) for name, value in options.items()}
    chosen.setdefault("format", "csv")
    return {name: value for name, value in chosen.items()
            if name == "format" or value != resolved.get(name, getattr(default, name, None))}


def _refuse_other_options(previous: dict[str, dict[str, Any]], mine: dict[str, Any], directory: Path) -> None:
    """--resume with sources to run: the earlier lines that say their options (from this version on) say these."""
    for entry in previous.values():
        theirs = entry.get("options")
        if isinstance(theirs, dict) and (theirs := _not_defaults(theirs)) != mine:
            changed = sorted(name for name in set(theirs) | set(mine) if theirs.get(name) != mine.get(name))
            said = ", ".join(_option(name, theirs) for name in changed)
            now = ", ".join(_option(name, mine) for name in changed)
            raise UsageError(f"--resume: {directory} holds results made with {said} (its manifest says), not {now}: "
                             "a resumed run finishes the run with its own options; give those, or choose another "
                             "output folder")


def _option(name: str, options: dict[str, Any]) -> str:
    """How the command line gives option ``name`` as ``options`` (:func:`result_options`) hold it."""
    flag = "--" + name.replace("_", "-")
    if name not in options:
        return f"the default {flag}"
    return flag if options[name] is True else f"{flag} {options[name]}"


def plan_sources(sources: StrPath | Iterable[StrPath] | None, output_dir: StrPath | None, config: RunConfig,
                 given: RunConfig, *, folder_held: bool = False) -> ManyPlan:
    """What a many-source run will do, checked before anything loads (:meth:`emopipe.Analyzer.plan_many` says how);
    ``config``: the per-source options resolved (:func:`many_config`), ``given``: the run's options as given.
    ``sources`` (else ``given.sources`` and list files) are expanded here, unless ``given.sources_expanded`` says
    that ``given.sources`` are already."""
    if sources is None and given.sources_expanded:
        found = given.sources
    else:
        wanted = path_items(sources) if sources is not None else given.sources
        found = expand_inputs(wanted, config.list_files, recursive=config.recursive).sources
    if not found:
        raise UsageError("no source given (files, folders, globs, --list FILE)")
    warn_linked(found)
    live = [redact_uri(u) for u in found if is_live(u)]
    if live:
        raise UsageError(f"{', '.join(live)}: cameras and streams run as a fleet (Analyzer.run_fleet), "
                         "not with files")
    unsupported = [flag for flag, used in (("--record", given.record), ("--summary", given.summary)) if used]
    if given.annotate:
        annotated_container(given.annotate)
        choose_ffmpeg(given.video_writer)  # (--video-writer ffmpeg without one: refused now)
    if unsupported:
        raise UsageError(f"{', '.join(unsupported)}: not for several sources in one run (each source's rows and "
                         "summary go in the -o folder, the run's in its summary.json); run one emopipe per "
                         "source for these")
    directory = given.output_folder(output_dir)
    input_files = InputFiles([*found, *([config.weights] if config.weights else [])])
    if given.report:  # (before the folder is made)
        if Path(given.report).suffix.lower() not in (".html", ".htm"):
            raise UsageError(f"--report {given.report}: the report is a web page; name it .html")
        # the page and its thumbnails folder under the names a one-source run's take (a few more than this one's,
        # never left under a partial name), and the page's lock file
        refuse_inputs([*RunConfig(report=given.report).written(),
                       Written("report", str(lock_path(Path(given.report))), "lock")], input_files,
                      keep=[str(directory)], advice="name the report otherwise")
    with ExitStack() as held:  # (handed to the plan; released here if planning fails)
        if not folder_held:  # before the checks: a run that started first has its files there
            held.enter_context(hold_folder(directory))
        if given.report:  # one page for every source, made from their rows files at the end
            ensure_writable(Path(given.report), "report")  # (once the folder is made: the page may be in it)
            # held as a one-source run holds it: a run into another folder with the same page is refused now, not
            # replaced by (or replacing) this one's page at the end
            held.enter_context(hold_outputs(RunConfig(report=given.report).locked_outputs()))
            # a page or thumbnails folder emopipe did not write is refused now, not after every source has run
            from emopipe.report.outputs import check_report_outputs

            check_report_outputs(given.report, inputs=found, without_thumbnails=None)
        plan = _plan_folder(found, directory, config, given, input_files)
        plan.held = held.pop_all()
    return plan


def _plan_folder(sources: Sequence[str], directory: Path, config: RunConfig, given: RunConfig,
                 input_files: InputFiles) -> ManyPlan:
    """plan_many's checks of the (held) folder: an earlier run's manifest and files, and the outputs' names (none
    of them one of the ``input_files``)."""
    manifest = Manifest(directory, files=True)
    if manifest.path.exists() and not config.resume:
        raise UsageError(f"{directory} holds an earlier run ({MANIFEST}); add --resume to finish it, or choose "
                         "another output folder")
    previous = manifest.previous() if config.resume else {}
    manifest.options = result_options(given)
    mine = {uri: manifest.entry_for(previous, uri) for uri in sources}
    own, reserved = manifest.names(previous, sources)
    planned = plan_outputs(sources, directory, given.format or "csv", own=own, reserved=reserved,
                           video=annotated_container(given.annotate) if given.annotate else None)
    todo = [p for p in planned if not manifest.done(mine[p.uri], wanted=[role for role, _ in p.roles()
                                                                          if role == "annotated_video"])]
    if todo:  # (one with nothing left to run — its --report page written, say — mixes nothing)
        _refuse_other_options(previous, manifest.options, directory)
    # no name the run writes is a source (nor the weights): a source's files under their own, partial and
    # temporary names, the manifest, the run's summary.json
    run_files = [Written("manifest", str(manifest.path)), Written("summary", str(directory / RUN_SUMMARY)),
                 Written("summary", str(partial_path(directory / RUN_SUMMARY)), "partial")]
    source_files = (name for p in todo for name in p.written(temporaries=input_files.at_temporary_names))
    refuse_inputs([*run_files, *source_files], input_files, keep=(),
                  advice="choose another output folder, or move that input")
    # a one-source run writing one of these names now (it found no folder lock here to share: it began before this
    # run made it) holds the name: refused, exit 5, as it would refuse this run had it come second (hold_outputs)
    refuse_outputs_in_use([*(path for p in todo for path in p.files), directory / RUN_SUMMARY])
    # a file in the way is replaced only when it is a source's own, by the manifest's word (an earlier run gave
    # it that name); any other is somebody else's — another tool's, or one the user put there
    for p in todo:
        # a file where a source's folder must be (out/a beside out/a/clip.emotions.csv): refused now, not as the
        # source's first rows are written mid-run
        blocking = next((f for f in p.rows.parents if f.is_relative_to(directory) and f.exists()
                         and not f.is_dir()), None)
        if blocking is not None:
            raise OutputError(f"{blocking} is a file where {p.uri}'s outputs need a folder; move it, or choose "
                              "another output folder")
        if own.get(p.uri) == p.name:
            continue
        clash = next((f for f in p.files if f.exists()), None)
        if clash is not None:
            raise UsageError(f"{clash} exists and is no file of this run's sources (the manifest does not give it "
                             "to them); choose another output folder, or move it")
    if not previous and (directory / RUN_SUMMARY).exists():
        raise UsageError(f"{directory / RUN_SUMMARY} exists (from an earlier run without a manifest); choose "
                         "another output folder")
    ensure_writable(directory / MANIFEST, "manifest")
    skipped: list[SourceResult] = []
    changed: list[str] = []  # sources done before whose file is another now (replaced, edited)
    doing = {p.uri for p in todo}  # (a set: a list compared dataclasses, quadratic in the sources)
    for p in planned:
        if p.uri not in doing:
            entry = mine[p.uri]
            assert entry is not None
            made_from, now = entry.get("source_file"), file_facts(p.uri)
            if isinstance(made_from, dict) and now is not None and made_from != now:
                changed.append(text_name(p.uri))
            outputs = {role: str(path) for role, path in manifest.outputs_of(entry).items()}
            done = SourceResult(source=p.uri, status="skipped", outputs=outputs, frames=_figure(entry, "frames"),
                                faces=_figure(entry, "faces"), rows=_figure(entry, "rows"))
            manifest.append(done.as_dict(), as_line=entry)  # (the options its results were made with)
            skipped.append(done)
    if changed:  # (their results kept: made from the earlier file, they are still a good result of it)
        logger.warning("%d source(s) changed since their results were written (%s%s): --resume keeps those results; "
                       "delete a source's rows file to have it done again", len(changed), ", ".join(changed[:3]),
                       f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return ManyPlan(config, directory, manifest, planned, [replace(p, position=i) for i, p in enumerate(todo)],
                    skipped, report=given.report)


def _figure(entry: dict[str, Any], name: str) -> int:
    """A count from an earlier manifest line (0 where the line lacks it, or an edit made it no count): a skipped
    source carries it into its own line and the run's summary."""
    value = entry.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


@dataclass
class ManyPlan:
    """A many-source run, planned and checked (:meth:`Analyzer.plan_many`). It holds its output folder and its
    ``--report`` page until :meth:`close` (or the end of a ``with`` block): no other run is planned into the folder,
    nor to write the page, meanwhile."""

    config: RunConfig
    directory: Path
    manifest: Manifest
    planned: list[PlannedSource]
    todo: list[PlannedSource]  # the sources to run (positions renumbered from 0)
    skipped: list[SourceResult]  # done by an earlier run (--resume)
    report: str | None = None  # --report: one HTML page over every completed source
    held: ExitStack = field(default_factory=ExitStack, repr=False, compare=False)  # the folder's and page's locks

    def close(self) -> None:
        """Release the output folder and the report page: call it once the run's last file is written (its manifest
        lines, summary.json, the renames, the report)."""
        self.held.close()

    def __enter__(self) -> ManyPlan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def report_many(plan: ManyPlan, outcome: ManyOutcome) -> None:
    """``--report`` of a many-source run: one page, a section per source, from the complete rows files
    (thumbnails cut from the sources' videos)."""
    if not plan.report:
        return
    import itertools

    from emopipe.report.outputs import write_report
    from emopipe.report.rows import read_records

    done = [r for r in outcome.results if r.status in ("ok", "skipped") and "rows" in r.outputs]
    rows = [r.outputs["rows"] for r in done]
    # every completed source has its section, those where no face was found too (the page and this line agree)
    try:
        # (the sources as their rows name them: a name's bytes that are not UTF-8 as \\xNN, io.records.text_name)
        reports = write_report(itertools.chain.from_iterable(read_records(path) for path in rows), plan.report,
                               sources_run=[text_name(r.source) for r in done], start_s=plan.config.start or 0.0,
                               videos={text_name(r.source): r.outputs["annotated_video"] for r in done
                                       if "annotated_video" in r.outputs})
    except KeyboardInterrupt:  # (the page is written whole or not at all) exit 130: what was asked is not all done
        logger.warning("interrupted while writing the report %s: it is not written (each source is as the manifest "
                       "says); the same command with --resume writes it", plan.report)
        raise
    faceless = len(done) - len({r.summary.source for r in reports})
    logger.info("report: %s (%d track(s) of %d source(s)%s)", plan.report, len(reports), len(done),
                f", {faceless} of them without a face" if faceless else "")


def finish_many(plan: ManyPlan, results: list[SourceResult], summary: RunSummary | None, interrupted: bool,
                wall_s: float, summaries: list[RunSummary] | None = None, **extra: Any) -> ManyOutcome:
    """The run's summary.json, written once every source has its manifest line: sources by status (``ok``,
    ``failed``, ``interrupted``, ``skipped``: counts), ``processed`` now and ``carried_over`` (skipped: done by an
    earlier run), the frames, faces and rows of them all and of ``this_run``, and ``run_interrupted`` (Ctrl-C /
    SIGTERM ended the run)."""
    counts = {status: sum(r.status == status for r in results) for status in STATUSES}
    # The figures describe every source (a --resume's archive as a whole): one an earlier run finished counts with
    # its manifest line's (its ``skipped`` result carries them); ``this_run`` and the rates are this run's own.
    processed = [r for r in results if r.status != "skipped"]
    totals = {figure: sum(getattr(r, figure) for r in results) for figure in ("frames", "faces", "rows")}
    this_run = {figure: sum(getattr(r, figure) for r in processed) for figure in ("frames", "faces", "rows")}
    run = {"sources": len(plan.planned), **counts, "processed": len(processed), "carried_over": counts["skipped"],
           **totals, "this_run": this_run, "wall_s": round(wall_s, 3),
           "fps": round(this_run["frames"] / wall_s, 2) if wall_s else 0.0,
           "faces_per_s": round(this_run["faces"] / wall_s, 2) if wall_s else 0.0, "run_interrupted": interrupted,
           "manifest": str(plan.manifest.path), "pipeline": summary.as_dict() if summary is not None else None,
           **extra}
    write_run_summary(plan.directory, run)
    if summaries is not None and summary is not None:
        summaries.append(summary)
    return ManyOutcome(results, summary, run, interrupted)


@dataclass
class ManyOutcome:
    """How a many-source run ended: one :class:`SourceResult` per source, the pipeline's summary, the run's."""

    results: list[SourceResult]
    summary: RunSummary | None
    run: dict[str, Any]
    interrupted: bool = False

    @property
    def failed(self) -> list[SourceResult]:
        return [r for r in self.results if r.status == "failed"]


# -- camera fleets (emopipe.pipeline.fleet runs them; planned here, so a Ray driver plans them without PyTorch) --

def plan_fleet(config: RunConfig, sources: Sequence[str], directory: Path,
               stack: ExitStack, video_parts: int = 1) -> tuple[list[PlannedSource], Manifest]:
    """Each camera's files in ``directory`` (named as a many-source run names them: the redacted URL without
    its credentials, ``webcam0``…; a suffix where two would collide), checked before anything opens: none of them
    the weights, nor an earlier run's file; with a recording, its first ``video_parts`` parts (over Ray: one more each
    time the camera moves). The folder is this run's until ``stack`` closes
    (:func:`~emopipe.io.records.hold_folder`): a second run into it at the same time is refused, not interleaved."""
    unsupported = [flag for flag, used in (("--report", config.report), ("--resume", config.resume),
                                           ("--summary", config.summary))
                   if used]
    if config.record and config.annotate:
        raise UsageError("--annotate and --record both record the annotated stream; give one")
    recording = config.record or config.annotate  # (each camera's, beside its rows: NAME.annotated.mp4)
    container = None
    if recording:
        container = annotated_container(recording, what="several cameras", file_flag="--record")
        if container == ".mp4" and choose_ffmpeg(config.video_writer) is None:
            raise UsageError("--record mp4: OpenCV's .mp4 is unplayable until closed, and a live run may be killed; "
                             "record mkv or avi, or let FFmpeg write the .mp4 in fragments (install it, or pip "
                             "install \"emopipe[video]\")")
    if unsupported:
        raise UsageError(f"{', '.join(unsupported)}: not for several cameras in one run (each camera's rows and "
                         f"summary go in the -o folder, the run's in its summary.json); run one emopipe per camera "
                         "for these")
    if (directory.exists() and not directory.is_dir()) or (directory.suffix.lower() in (".csv", ".jsonl")
                                                          and not directory.exists()):
        raise UsageError(f"-o {directory}: with several cameras the output is a folder (a rows file per camera "
                         "goes in it); give a folder name")
    planned = plan_outputs(sources, directory, config.format or "csv", video=container)
    # no name the run writes is the weights (the cameras are no files), refused before the folder is touched: each
    # camera's rows and recording (written in place) and summary (and its partial name), the manifest, the run's
    # summary.json (and its partial name)
    summaries = [*(p.summary for p in planned), directory / RUN_SUMMARY]
    in_place = [*(p.rows for p in planned),
                *(video for p in planned for part in range(1, video_parts + 1)
                  if (video := p.video_part(part)) is not None)]
    written = [Written("manifest", str(directory / MANIFEST)), *(Written("rows", str(path)) for path in in_place),
               *(name for path in summaries for name in (Written("summary", str(path)),
                                                         Written("summary", str(partial_path(path)), "partial")))]
    refuse_inputs(written, InputFiles([config.weights] if config.weights else []), keep=(),
                  advice="choose another output folder, or move that input")
    stack.enter_context(hold_folder(directory))  # (before the checks: a run that started first has its files there)
    ensure_writable(directory / MANIFEST, "manifest")
    manifest = Manifest(directory)
    if manifest.path.exists():
        raise UsageError(f"{directory} holds an earlier run ({MANIFEST}); choose another output folder")
    clash = next((path for path in [*in_place, *summaries] if path.exists()), None)
    if clash is not None:
        raise UsageError(f"{clash} exists (from an earlier run); choose another output folder")
    return planned, manifest


@dataclass
class FleetOutcome:
    """How a fleet run ended: a result per camera, the run's summary (``DIR/summary.json``)."""

    results: list[SourceResult]
    run: dict[str, Any]
    interrupted: bool = False

    @property
    def failed(self) -> list[SourceResult]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def exit_code(self) -> int:
        """130 interrupted; 7 every camera lost (or none opened; 5 every camera's recording failed: a full disk); 9
        some failed; 0 every camera ended as asked."""
        if self.interrupted:
            return INTERRUPTED_EXIT_CODE
        if self.failed and len(self.failed) == len(self.results):
            codes = {r.exit_code for r in self.failed}
            return OutputError.exit_code if codes == {OutputError.exit_code} else SourceUnavailableError.exit_code
        if self.failed:
            return SOME_SOURCES_FAILED_EXIT_CODE
        return 0


@dataclass(frozen=True)
class CameraSoFar:
    """What a camera moved to another Ray worker (its worker died) brings along: the frames its earlier workers
    analysed (as they last told the driver), the number its next frame gets, what is left of its ``--end`` and
    ``--max-frames``, and how many times it moved. Its rows so far are in its rows file, which it goes on."""

    frames: int = 0
    first_index: int = 0
    end_s: float | None = None
    max_frames: int | None = None
    moves: int = 0
