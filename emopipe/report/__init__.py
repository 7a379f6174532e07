"""Per-person emotion over time: track summaries, expression segments and change points, and a
self-contained HTML report (docs/report.md).

Made from :class:`~emopipe.types.FaceRecord`\\ s, during a run or from rows files written earlier;
it needs neither torch nor a GPU.
"""
