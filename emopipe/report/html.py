"""One self-contained HTML page: per source a table of its tracks, per track its thumbnail, its numbers and
one chart block (valence/arousal over time with the change points, expression shares over time as a
stacked area, and the valence × arousal trajectory on the circumplex).

Charts are Matplotlib figures rendered to SVG and written into the page: no script, no font, no
request of any kind, so the file opens offline in any browser, prints sharply, and cannot show a
script error. (Plotly would add hover read-outs, but its JavaScript alone is about 4.5 MB per file;
a track's SVG chart is some 100 kB.) Long tracks are decimated before plotting: consecutive records
are averaged in bins, at most ``TIMELINE_POINTS`` bins for the valence/arousal lines and
``AREA_POINTS`` for the stacked area and the trajectory, so the page's size grows with the number of
tracks, not with the video's length. Thumbnails are inline JPEGs.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from emopipe._version import __version__
from emopipe.io.records import text_name
from emopipe.report.segments import Segment
from emopipe.report.tracks import UNIX_TIME_S, TrackSeries, TrackSummary, scale_exponent

TIMELINE_POINTS = 600
AREA_POINTS = 300
PLOT_LIMIT = 1e100  # valence/arousal beyond this are plotted in units of a power of ten (Matplotlib's axis
# arithmetic overflows near ±1e308); a checkpoint's outputs may be any finite numbers
NO_FACES = "no face found"
SINGLE_FRAME_AXIS_S = 1.0  # the time axis's width for a one-frame track
GAP_BREAK_S = 1.0  # the valence and arousal lines break where the face was not seen for longer (and 3 usual steps)
CHARTS_A_WORKER = 8  # fewer charts than this a process: its start (importing Matplotlib, ~1 s) costs more than it saves

# one colour per expression, the same in every chart (colour-blind-safe Okabe–Ito hues where there are enough)
EXPRESSION_COLOURS = {"neutral": "#9e9e9e", "happy": "#e69f00", "sad": "#0072b2", "surprise": "#56b4e9",
                      "fear": "#cc79a7", "disgust": "#009e73", "anger": "#d55e00", "contempt": "#7f5f3f"}
_SPARE_COLOURS = ("#444444", "#f0e442", "#8dd3c7", "#bebada")
VALENCE_COLOUR, AROUSAL_COLOUR = "#1b6ca8", "#c0392b"
GENERATOR_META = "<meta name='generator' content='emopipe "  # in every page's <head>: tells emopipe's pages apart


@dataclass(frozen=True)
class SourceVideo:
    """A source's annotated video as the page shows it: its address from the page (relative, so the page and the
    video move together) and the source time of its first frame (``--start``), so each time on the page links to
    the same moment of the video (a media fragment, ``#t=SECONDS``: no script)."""

    href: str
    start_s: float = 0.0

    def at(self, seconds: float) -> str:
        return f"{self.href}#t={max(seconds - self.start_s, 0.0):.2f}"


def _time_cell(seconds: float, origin_s: float, video: SourceVideo | None) -> str:
    """A time on the page, linked to that moment of the source's annotated video when it has one."""
    text = _fmt(seconds - origin_s)
    if video is None:
        return text
    return f"<a href='{html.escape(video.at(seconds))}' title='the annotated video from here'>{text}</a>"


@dataclass
class TrackReport:
    """What the page shows of one track."""

    summary: TrackSummary
    series: TrackSeries
    segments: list[Segment]
    thumbnail_jpeg: bytes | None = field(default=None, repr=False)  # (kilobytes: a notebook showed them whole)


def binned(values: np.ndarray, max_points: int) -> np.ndarray:
    """Means of consecutive bins of equal size (the last may be shorter), at most ``max_points`` of them."""
    n = len(values)
    size = max(1, math.ceil(n / max_points))
    if size == 1:
        return values
    starts = np.arange(0, n, size)
    counts = np.diff(np.append(starts, n)).reshape(-1, *([1] * (values.ndim - 1)))
    e = scale_exponent(values)  # (sums of huge values overflow; the scaled ones' cannot, and are exact)
    return np.ldexp(np.add.reduceat(np.ldexp(values, -e), starts, axis=0) / counts, e)  # type: ignore[no-any-return]


def broken_at_gaps(times: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """``times`` and ``values`` (by time along their first axis) with a gap (NaN: Matplotlib lifts the pen) wherever
    the track was not seen for longer than ``GAP_BREAK_S`` and three of its usual steps: a line or an area does not
    join the values on either side of an absence, as if the face had been there all along."""
    if len(times) < 3:
        return (times, *values)
    steps = np.diff(times)
    at = np.flatnonzero(steps > max(GAP_BREAK_S, 3 * float(np.median(steps)))) + 1
    if not len(at):
        return (times, *values)
    return (np.insert(times, at, (times[at - 1] + times[at]) / 2),
            *(np.insert(np.asarray(v, dtype=np.float64), at, np.nan, axis=0) for v in values))


def _legend_text(label: str) -> str:
    """A class label as Matplotlib draws it literally: a ``$`` is not the start of mathematics (a label with one is
    drawn as written, not refused with a parse error), and a leading ``_`` does not hide it from the legend."""
    text = label.replace("$", r"\$")
    return f"\u200b{text}" if text.startswith("_") else text


def _colour(label: str, i: int) -> str:
    return EXPRESSION_COLOURS.get(label, _SPARE_COLOURS[i % len(_SPARE_COLOURS)])


def _label_colour(summary: TrackSummary) -> str:
    """The colour of the track's dominant expression, as its charts draw it (a label emopipe has no colour for takes a
    spare one by its place among the model's classes)."""
    labels = summary.labels or tuple(summary.shares)
    return _colour(summary.dominant, labels.index(summary.dominant) if summary.dominant in labels else 0)


def track_chart_svg(track: TrackReport, origin_s: float) -> str:
    """The track's chart block as an SVG document (without the XML prologue)."""
    import matplotlib
    from matplotlib.figure import Figure

    series = track.series
    times = series.times - origin_s
    valence, arousal, probabilities = series.valence, series.arousal, series.probabilities
    largest = max(float(np.abs(valence).max(initial=0)), float(np.abs(arousal).max(initial=0)))
    unit = 10.0 ** math.floor(math.log10(largest)) if largest > PLOT_LIMIT else 1.0
    salt = f"{text_name(series.source)}#{series.track_id}"  # unique, stable element ids for every chart in one page
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "font.size": 8,
                                "axes.spines.top": False, "axes.spines.right": False}):
        # Fixed places, not a layout engine: a constrained layout measured every text and drew each chart twice,
        # 0.4 s a chart (a report of 200 tracks took 94 s). Right of the timelines, the legend: as wide as its
        # longest label (~0.55 % of the figure a character at its size)
        figure = Figure(figsize=(10, 3.8))
        longest = max((len(label) for label in series.labels), default=0)
        grid = figure.add_gridspec(2, 1, left=0.065, right=max(0.35, 0.58 - 0.0055 * max(0, longest - 8)),
                                   bottom=0.11, top=0.9, hspace=0.28)
        timeline = figure.add_subplot(grid[0])
        area = figure.add_subplot(grid[1], sharex=timeline)
        circumplex = figure.add_axes((0.73, 0.11, 0.26, 0.79))

        t_line = binned(times, TIMELINE_POINTS)
        single = len(t_line) == 1  # one frame (every track of one image): a line through it would show nothing
        marker = "o" if single else None
        t_drawn, v_line, a_line = broken_at_gaps(t_line, binned(valence, TIMELINE_POINTS) / unit,
                                                 binned(arousal, TIMELINE_POINTS) / unit)
        timeline.plot(t_drawn, v_line, color=VALENCE_COLOUR, lw=1, marker=marker, label="valence")
        timeline.plot(t_drawn, a_line, color=AROUSAL_COLOUR, lw=1, marker=marker, label="arousal")
        affect = [s for s in track.segments if s.kind == "affect"]
        for segment in affect:
            start, end = segment.start_s - origin_s, segment.end_s - origin_s
            timeline.hlines([segment.valence_mean / unit], start, end, colors=VALENCE_COLOUR, lw=2.5, alpha=0.35)
            timeline.hlines([segment.arousal_mean / unit], start, end, colors=AROUSAL_COLOUR, lw=2.5, alpha=0.35)
        for segment in affect[1:]:
            timeline.axvline(segment.start_s - origin_s, color="#333333", lw=0.8, ls="--")
        timeline.axhline(0, color="#bbbbbb", lw=0.5)
        in_units = f" (× {unit:.0e})" if unit != 1 else ""
        timeline.set_ylabel(f"valence / arousal{in_units}")
        timeline.set_title("valence and arousal (dashed: change points; bands: segment means)", loc="left")
        # right of the axes, as the expressions' legend below it: inside, it covered the lines near their top
        timeline.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=7)

        t_area = binned(times, AREA_POINTS)
        shares = binned(probabilities, AREA_POINTS)
        colours = [_colour(label, i) for i, label in enumerate(series.labels)]
        if single:  # the shares stacked in one bar (an area over one instant has no width)
            area.bar(np.repeat(t_area, len(colours)), shares[0], bottom=np.cumsum(shares[0]) - shares[0],
                     width=SINGLE_FRAME_AXIS_S / 3, color=colours, label=[_legend_text(x) for x in series.labels])
        else:
            t_stacked, stacked = broken_at_gaps(t_area, shares)  # (no area over an absence either)
            area.stackplot(t_stacked, stacked.T, labels=[_legend_text(x) for x in series.labels], colors=colours,
                           lw=0)
        for segment in (s for s in track.segments if s.kind == "expression"):
            if segment.index:
                area.axvline(segment.start_s - origin_s, color="white", lw=1)
        area.set_ylim(0, 1)
        area.set_ylabel("expression")
        area.set_xlabel("time (s)" if origin_s == 0 else "time from the source's first face (s)")
        area.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=7)
        if single:  # an axis of some width around the frame, marked only at its time (no negative times)
            timeline.set_xlim(t_line[0] - SINGLE_FRAME_AXIS_S / 2, t_line[0] + SINGLE_FRAME_AXIS_S / 2)
            timeline.set_xticks(t_line)
            timeline.margins(y=0.2)  # (whole markers, not halves cut at the axis's edge)

        v_path, a_path = binned(valence, AREA_POINTS) / unit, binned(arousal, AREA_POINTS) / unit
        circumplex.add_patch(matplotlib.patches.Circle((0, 0), 1, fill=False, color="#cccccc", lw=0.8))
        circumplex.axhline(0, color="#cccccc", lw=0.5)
        circumplex.axvline(0, color="#cccccc", lw=0.5)
        circumplex.plot(v_path, a_path, color="#888888", lw=0.6, alpha=0.7)
        circumplex.scatter(v_path, a_path, c=np.linspace(0, 1, len(v_path)), cmap="viridis", s=6, lw=0)
        circumplex.plot(v_path[:1], a_path[:1], "o", mfc="none", mec="black", ms=7, label="start")
        circumplex.plot(v_path[-1:], a_path[-1:], "s", mfc="none", mec="black", ms=7, label="end")
        reach = max(1.0, float(np.abs(np.concatenate([v_path, a_path])).max()) * 1.05)
        circumplex.set_xlim(-reach, reach)
        circumplex.set_ylim(-reach, reach)
        circumplex.set_aspect("equal")
        # (numbers past 10^4 with a power of ten at the axis's end: the fixed margins hold four digits and a sign)
        timeline.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4))
        circumplex.ticklabel_format(axis="both", style="sci", scilimits=(-3, 4))
        circumplex.set_xlabel(f"valence{in_units}")
        circumplex.set_ylabel(f"arousal{in_units}")
        # (the markers named in the title: a legend inside covered the lower right, calm and pleasant faces' quarter)
        circumplex.set_title("\u25cb start \u2192 \u25a1 end (colour: time)", loc="left")

        out = io.StringIO()
        figure.savefig(out, format="svg", metadata={"Date": None})
    svg = out.getvalue()
    return svg[svg.index("<svg"):]


def chart_processes() -> int:
    """How many processes draw a page's charts (~0.2 s each) by default: this machine's CPUs where Python processes
    may be started safely, else one. A worker is a fresh interpreter that runs the program's main file again (as
    ``__mp_main__``): safe for emopipe's own command and where there is no main file (a notebook, ``python -c``),
    not for a user's script, which may lack an ``if __name__ == "__main__"`` guard and would run again in it."""
    main = sys.modules.get("__main__")
    spec, path = getattr(main, "__spec__", None), getattr(main, "__file__", None)
    safe = path is None or (spec is not None and spec.name.split(".")[0] == "emopipe") or Path(path).name == "emopipe"
    return (os.cpu_count() or 1) if safe else 1


def _ignore_ctrl_c() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (the command's Ctrl-C is its own: no worker's traceback)


def _chart(item: tuple[TrackReport, float]) -> str:
    return track_chart_svg(*item)


def charts(items: Sequence[tuple[TrackReport, float]], processes: int) -> list[str]:
    """:func:`track_chart_svg` of each ``(track, origin)``, in order, over up to ``processes`` processes (a page of
    hundreds of tracks took minutes in one); the same SVG either way."""
    workers = min(processes, len(items) // CHARTS_A_WORKER)
    if workers < 2:
        return [track_chart_svg(track, origin) for track, origin in items]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_ctrl_c)
    try:
        return list(pool.map(_chart, items, chunksize=max(1, len(items) // (4 * workers))))
    finally:
        pool.shutdown(cancel_futures=True)  # (interrupted: the charts not begun are dropped, not drawn first)


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:16px;color:#222}
h1{margin:0 0 4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;font-size:13px}td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #eee}
th:first-child,td:first-child{text-align:left}.meta{color:#666}
.track{border:1px solid #ddd;border-radius:6px;padding:12px;margin:16px 0}.track h3{margin:0 0 8px}
.track-body{display:flex;gap:16px;align-items:flex-start}.thumbnail{width:112px;height:112px;border-radius:4px}
.no-thumbnail{width:112px;height:112px;background:#eee;color:#888;display:flex;align-items:center;
justify-content:center;font-size:12px;border-radius:4px}
.chart svg{width:100%;height:auto}.badge{background:#f5c542;border-radius:3px;padding:0 6px;font-size:12px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
.video video{max-width:100%;max-height:360px;background:#000;border-radius:4px}
"""


def _fmt(value: float, digits: int = 2) -> str:
    # (a checkpoint's huge outputs in fixed point would be hundreds of digits wide)
    return f"{value:.{digits}f}" if abs(value) < 1e9 else f"{value:.3g}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _shown(source: str) -> str:
    """A source's name on the page: a name's bytes that are not UTF-8 (Latin-1) as ``\\xNN``, as the rows write them
    (they are no text a page can hold: writing it failed), escaped."""
    return html.escape(text_name(source))


def _track_anchor(source_index: int, track_id: int) -> str:
    return f"source-{source_index}-track-{track_id}"


def _numbers_table(s: TrackSummary, origin_s: float) -> str:
    shares = sorted(s.shares.items(), key=lambda item: -item[1])
    share_text = ", ".join(f"{html.escape(label)} {share:.0%}" for label, share in shares if share >= 0.005)
    rows = [
        ("seen", f"{_fmt(s.first_s - origin_s)} – {_fmt(s.last_s - origin_s)} s ({_duration(s.duration_s)}, "
                 f"{s.frames} frames)"),
        ("gaps", f"{s.gaps} ({_fmt(s.gap_s)} s missing)"),
        ("valence", f"mean {_fmt(s.valence_mean)}, median {_fmt(s.valence_median)}, p10–p90 "
                    f"{_fmt(s.valence_p10)} – {_fmt(s.valence_p90)}"),
        ("arousal", f"mean {_fmt(s.arousal_mean)}, median {_fmt(s.arousal_median)}, p10–p90 "
                    f"{_fmt(s.arousal_p10)} – {_fmt(s.arousal_p90)}"),
        ("dominant", html.escape(s.dominant)),
        ("shares", share_text),
    ]
    body = "".join(f"<tr><th>{name}</th><td style='text-align:left'>{value}</td></tr>" for name, value in rows)
    return f"<table class='numbers'>{body}</table>"


def _segments_table(segments: Sequence[Segment], origin_s: float, video: SourceVideo | None = None) -> str:
    rows = "".join(
        f"<tr><td>{s.kind}</td><td>{_time_cell(s.start_s, origin_s, video)}</td><td>{_fmt(s.end_s - origin_s)}</td>"
        f"<td>{html.escape(s.label)}</td><td>{_fmt(s.valence_mean)}</td><td>{_fmt(s.arousal_mean)}</td></tr>"
        for s in segments)
    return ("<details><summary>segments</summary><table><tr><th>kind</th><th>start (s)</th><th>end (s)</th>"
            f"<th>expression</th><th>valence</th><th>arousal</th></tr>{rows}</table></details>")


def _video_block(video: SourceVideo) -> str:
    """The source's annotated video, played in the page (H.264 ``.mp4``, as FFmpeg writes it, plays in every browser;
    where the browser cannot play it, the link still opens it)."""
    href = html.escape(video.href)
    return (f"<div class='video'><video controls preload='metadata' src='{href}'></video>"
            f"<p class='meta'><a href='{href}'>the annotated video</a>; each time below opens it at that moment</p>"
            "</div>")


def _origin(items: Sequence[TrackReport]) -> float:
    """Where a source's times count from on the page: its start, or a live source's first face (wall-clock times)."""
    first = min(t.summary.first_s for t in items)
    return first if first > UNIX_TIME_S else 0.0


def render(tracks: Sequence[TrackReport], *, title: str = "emopipe report", sources_run: Sequence[str] = (),
           videos: Mapping[str, SourceVideo] | None = None, processes: int | None = None) -> str:
    """The page for ``tracks`` (of one or more sources), as a string. ``sources_run``: every source the page
    covers, in order (a many-source run's), so that those where no face was found are listed too. ``videos``: the
    annotated video of each source that has one (by source), shown in its section and linked from its times.
    ``processes``: how many draw the charts (default :func:`chart_processes`)."""
    videos = videos or {}
    sources: dict[str, list[TrackReport]] = {source: [] for source in sources_run}
    for track in tracks:
        sources.setdefault(track.summary.source, []).append(track)
    origins = {source: _origin(items) for source, items in sources.items() if items}
    drawn = iter(charts([(t, origins[source]) for source, items in sources.items() for t in items],
                        chart_processes() if processes is None else processes))
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    live = any(items and min(t.summary.first_s for t in items) > UNIX_TIME_S for items in sources.values())
    times = "Times are seconds from the start of the source" + (
        " (a live source's: from its first face, whose clock time its section gives)" if live else "") + "."
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"{GENERATOR_META}{__version__}'><style>{_STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1><p class='meta'>{len(sources)} source(s), {len(tracks)} track(s); "
             f"made by emopipe {__version__} on {generated}. {times}</p>"]
    parts.append("<nav id='index'><h2>Sources</h2><ul>")
    for k, (source, items) in enumerate(sources.items(), start=1):
        if not items:
            parts.append(f"<li><a href='#source-{k}'>{_shown(source)}</a>: {NO_FACES}</li>")
            continue
        # from the first face's first frame to the end of the last one's last (its own interval counted, as each
        # track's duration counts it)
        longest = max(t.summary.first_s + t.summary.duration_s for t in items) - min(t.summary.first_s for t in items)
        parts.append(f"<li><a href='#source-{k}'>{_shown(source)}</a>: {len(items)} track(s) over "
                     f"{_duration(longest)}</li>")
    parts.append("</ul></nav>")
    for k, (source, items) in enumerate(sources.items(), start=1):
        if not items:  # (its annotated video still shown: where the faces were missed, if they were)
            video = videos.get(source)
            parts.append(f"<section class='source' id='source-{k}'><h2>{_shown(source)}</h2>"
                         f"<p class='meta'>{NO_FACES}.</p>{'' if video is None else _video_block(video)}</section>")
            continue
        origin = origins[source]
        video = videos.get(source) if origin == 0.0 else None  # (a live source's clock is not its recording's)
        parts.append(f"<section class='source' id='source-{k}'><h2>{_shown(source)}</h2>")
        if origin:
            clock = datetime.fromtimestamp(origin, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-4]
            parts.append(f"<p class='meta'>A live source: its times are seconds from its first face, seen at {clock} "
                         "UTC.</p>")
        if video is not None:
            parts.append(_video_block(video))
        parts.append("<table class='tracks'><tr><th>track</th><th>from (s)</th><th>duration</th><th>frames</th>"
                     "<th>dominant</th><th>valence (median)</th><th>arousal (median)</th><th></th></tr>")
        for t in items:
            s = t.summary
            parts.append(f"<tr><td><a href='#{_track_anchor(k, s.track_id)}'>{s.track_id}</a></td>"
                         f"<td>{_time_cell(s.first_s, origin, video)}</td><td>{_duration(s.duration_s)}</td>"
                         f"<td>{s.frames}</td>"
                         f"<td><span class='swatch' style='background:{_label_colour(s)}'></span>"
                         f"{html.escape(s.dominant)}</td><td>{_fmt(s.valence_median)}</td>"
                         f"<td>{_fmt(s.arousal_median)}</td><td>{'short' if s.short else ''}</td></tr>")
        parts.append("</table>")
        for t in items:
            s = t.summary
            badge = " <span class='badge' title='seen for a short time'>short</span>" if s.short else ""
            if t.thumbnail_jpeg:
                data = base64.b64encode(t.thumbnail_jpeg).decode("ascii")
                picture = (f"<img class='thumbnail' alt='track {s.track_id}' "
                           f"src='data:image/jpeg;base64,{data}'>")
            else:
                picture = "<div class='no-thumbnail'>no thumbnail</div>"
            parts.append(f"<article class='track' id='{_track_anchor(k, s.track_id)}' data-track='{s.track_id}'>"
                         f"<h3>Track {s.track_id}{badge}</h3><div class='track-body'>{picture}"
                         f"{_numbers_table(s, origin)}</div>"
                         f"<div class='chart' data-track='{s.track_id}'>{next(drawn)}</div>"
                         f"{_segments_table(t.segments, origin, video)}</article>")
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "".join(parts)
