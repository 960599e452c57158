"""Small raster line charts drawn with Pillow, in matplotlib's default look: a run's delay_cdf.png and imbalance.png.

Why not matplotlib: its import alone was most of what a run's two plots cost (~0.6 of ~1 s of CPU).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import struct
import zlib
from pathlib import Path

import attrs
import numpy as np
from PIL import Image, ImageDraw, ImageFont

DPI = 110
SCALE = 2  # everything is drawn this many times larger, then reduced: anti-aliased lines and text
PT = DPI / 72 * SCALE  # canvas pixels per point
TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
         "#17becf")
WHITE, BLACK = "#ffffff", "#000000"
GRID = "#dfdfdf"  # matplotlib's grid colour (#b0b0b0) at alpha 0.4 on white
LEGEND_EDGE = "#cccccc"
NOTE_GREY = "#4d4d4d"

# matplotlib's defaults, in points
PAD = 10.8  # tight_layout's margin round everything (1.08 x the font size)
TICK, MINOR_TICK, TICK_PAD = 3.5, 2.0, 3.5
LABEL_PAD, TITLE_PAD = 4.0, 6.0
MARKER_SIZE, MARKER_EDGE = 5.0, 1.0
TEXT_PT, TITLE_PT, SMALL_PT = 10, 12, 8
MARGIN = 0.05  # of the data range, either side of it (in log10 on a log axis)
MOST_TICKS = 9

DASHES = {"-": (), "--": (3.7, 1.6), ":": (1.0, 1.65), "-.": (6.4, 1.6, 1.0, 1.6)}  # in line widths
_SQRT_HALF = math.sqrt(0.5)
MARKERS = {  # matplotlib's marker outlines, in marker sizes, y up ("o" is a circle)
    "s": ((-.5, -.5), (.5, -.5), (.5, .5), (-.5, .5)),
    "^": ((0, .5), (-.5, -.5), (.5, -.5)),
    "v": ((0, -.5), (-.5, .5), (.5, .5)),
    "D": ((0, _SQRT_HALF), (_SQRT_HALF, 0), (0, -_SQRT_HALF), (-_SQRT_HALF, 0)),
    "P": tuple((x / 6, y / 6) for x, y in ((-1, -3), (1, -3), (1, -1), (3, -1), (3, 1), (1, 1), (1, 3), (-1, 3),
                                             (-1, 1), (-3, 1), (-3, -1), (-1, -1))),
    "X": tuple((x / 4, y / 4) for x, y in ((-1, -2), (0, -1), (1, -2), (2, -1), (1, 0), (2, 1), (1, 2), (0, 1),
                                             (-1, 2), (-2, 1), (-1, 0), (-2, -1))),
}
LEGEND_CORNERS = {"upper right": 0.0, "lower right": 1.0}  # where the box sits: its top at 0, its bottom at 1
SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")  # results.plain_power reads it too


def dash_pattern(linestyle) -> tuple[float, ...]:
    """A matplotlib line style ('-', '--', ':', '-.' or ``(0, on-off lengths)``) as on-off lengths in line widths."""
    if isinstance(linestyle, str):
        return DASHES[linestyle]
    offset, pattern = linestyle
    if offset:
        raise ValueError(f"dash offsets are not drawn: {linestyle!r}")
    return tuple(pattern)


@attrs.frozen
class Style:
    """How a series is drawn: colour, width (points), dash pattern (on-off lengths in widths; () solid) and
    marker (a hollow one of MARKERS or "o")."""
    colour: str
    width: float
    dashes: tuple[float, ...] = ()
    marker: str | None = None


@attrs.frozen(eq=False)
class Series:
    """One curve: ``kind`` is "step" (matplotlib's where="post"), "line" or "hline" (``y[0]`` across the axis);
    markers at the points ``marks`` picks."""
    kind: str
    x: np.ndarray
    y: np.ndarray
    style: Style
    label: str | None = None
    marks: slice | None = None


@attrs.frozen
class Scale:
    """One axis's range, linear or log-10, and its ticks."""
    lo: float
    hi: float
    log: bool = False

    def fraction(self, values) -> np.ndarray:
        """Where ``values`` fall along the axis: 0 at ``lo``, 1 at ``hi`` (not finite where a log axis cannot go)."""
        v = np.asarray(values, dtype=np.float64)
        if self.log:
            with np.errstate(divide="ignore", invalid="ignore"):
                return (np.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        return (v - self.lo) / (self.hi - self.lo)

    def ticks(self, most: int = MOST_TICKS) -> tuple[np.ndarray, np.ndarray]:
        """(major, minor) tick values in range: ``linear_ticks`` or ``log_ticks``."""
        return log_ticks(self.lo, self.hi, most) if self.log else (linear_ticks(self.lo, self.hi, most), np.empty(0))

    def labels(self, ticks: np.ndarray) -> list[str]:
        """Tick labels: powers of ten as ``10⁻³`` (others ``2×10⁻³``) on a log axis, ``compact`` on a linear one."""
        return [power_label(t) for t in ticks] if self.log else compact(ticks)


def data_range(values: np.ndarray, log: bool) -> Scale:
    """The axis matplotlib fits to ``values``: their range and MARGIN either side (in log10 on a log axis);
    a single value gets a decade either side (log) or 5% of itself (linear)."""
    v = values[np.isfinite(values) & ((values > 0) if log else True)]
    if v.size == 0:
        return Scale(0.0, 1.0)
    lo, hi = float(v.min()), float(v.max())
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    if hi - lo <= 1e-12 * max(abs(lo), abs(hi), 1.0):
        spread = 1.0 if log else (0.05 * abs(lo) or 0.05)
        lo, hi = lo - spread, hi + spread
    lo, hi = lo - MARGIN * (hi - lo), hi + MARGIN * (hi - lo)
    return Scale(10 ** lo, 10 ** hi, True) if log else Scale(lo, hi)


def linear_ticks(lo: float, hi: float, most: int = MOST_TICKS) -> np.ndarray:
    """Nice ticks in [lo, hi] as matplotlib's MaxNLocator picks them: the smallest step of 1, 2, 2.5 or 5 x 10^k
    that cuts the range into at most ``most`` parts, a smaller one if fewer than two ticks would show."""
    span = hi - lo
    base = 10.0 ** math.floor(math.log10(span / most))
    steps = [m * base for m in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10)]
    fits = [s for s in steps if s >= span / most * (1 - 1e-9)]
    for step in [fits[0]] + [s for s in reversed(steps) if s < fits[0]]:
        first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
        if last - first >= 1:
            break
    return np.arange(first, last + 1) * step + 0.0  # + 0.0: no -0.0 (labelled "−0.0")


def log_ticks(lo: float, hi: float, most: int = MOST_TICKS) -> tuple[np.ndarray, np.ndarray]:
    """(major, minor) ticks in [lo, hi] on a log axis: the powers of ten (every ``stride``-th when more than
    ``most`` would show) and between them 2..9 x each decade (or the skipped powers when strided)."""
    low, high = math.log10(lo) - 1e-9, math.log10(hi) + 1e-9  # a power of ten at an end is in range
    powers = np.arange(math.ceil(low), math.floor(high) + 1)
    stride = max(1, math.ceil(powers.size / most))
    if stride > 1:
        return 10.0 ** powers[powers % stride == 0], 10.0 ** powers[powers % stride != 0]
    decades = np.arange(math.floor(low), math.ceil(high))
    minor = (np.arange(2, 10)[None, :] * 10.0 ** decades[:, None]).ravel()
    with np.errstate(divide="ignore"):
        inside = (low <= np.log10(minor)) & (np.log10(minor) <= high)
    return 10.0 ** powers, minor[inside]


def power_label(value: float) -> str:
    """``10⁻³`` for a power of ten, ``2×10⁻³`` for another value of a log axis."""
    exp = math.floor(math.log10(value) + 1e-9)
    coeff = round(value / 10.0 ** exp, 6)
    power = "10" + str(exp).translate(SUPERSCRIPT)
    return power if coeff == 1 else f"{coeff:g}×{power}"


def compact(ticks: np.ndarray) -> list[str]:
    """Labels of evenly spaced ticks with the decimals their step needs (0.0 0.2 ... 1.0; 0.00 0.25; 130000
    135000) and matplotlib's minus sign."""
    step = float(ticks[1] - ticks[0]) if ticks.size > 1 else abs(float(ticks[0])) if ticks.size else 1.0
    decimals = next((d for d in range(16) if abs(round(step, d) - step) <= 1e-6 * step), 16)
    return [f"{t:.{decimals}f}".replace("-", "−") for t in ticks]


@attrs.define(eq=False)
class Panel:
    """One axes of a chart: its series, y range and label, legend corner and a message in its middle.
    ``box`` (left, top, right, bottom on the canvas, SCALE x the image) and the scales are set when it is drawn."""
    height: float = 1.0  # its share of the charts' height
    series: list[Series] = attrs.field(factory=list)
    ylim: tuple[float, float] | None = None
    ylabel: str = ""
    legend: str | None = None  # a key of LEGEND_CORNERS
    legend_pt: float = TEXT_PT
    message: str = ""
    box: tuple[float, float, float, float] | None = None
    xscale: Scale | None = None
    yscale: Scale | None = None

    def step(self, x, y, style: Style, label: str | None = None, marks: slice | None = None) -> None:
        """A step curve, each value held until the next x (matplotlib's ``where="post"``)."""
        self.series.append(Series("step", _floats(x), _floats(y), style, label, marks))

    def line(self, x, y, style: Style, label: str | None = None) -> None:
        """A line through the points (a NaN breaks it)."""
        self.series.append(Series("line", _floats(x), _floats(y), style, label))

    def hline(self, y: float, style: Style, label: str | None = None) -> None:
        """A horizontal line across the axis at ``y``."""
        self.series.append(Series("hline", np.empty(0), np.array([float(y)]), style, label))

    def pixel(self, x: float, y: float) -> tuple[float, float]:
        """The image pixel (column, row) of the data point (x, y), once the chart is drawn."""
        left, top, right, bottom = self.box
        fx, fy = float(self.xscale.fraction(x)), float(self.yscale.fraction(y))
        return (left + fx * (right - left)) / SCALE, (bottom - fy * (bottom - top)) / SCALE


@attrs.define(eq=False)
class Chart:
    """A figure of ``panels`` stacked, sharing one x axis (log or linear): drawn by ``render``, encoded by ``png``."""
    width_in: float
    height_in: float
    panels: list[Panel]
    xlog: bool = False
    title: str = ""
    xlabel: str = ""
    note: str = ""  # small grey text at the bottom left

    def render(self) -> Image.Image:
        """The chart as an RGB image of width_in x height_in at DPI."""
        size = (round(self.width_in * DPI) * SCALE, round(self.height_in * DPI) * SCALE)
        canvas = Image.new("RGB", size, WHITE)
        _Layout(self, size).draw(canvas)
        return canvas.reduce(SCALE)

    def png(self) -> bytes:
        """The chart as PNG bytes (``png_bytes``)."""
        return png_bytes(self.render())


def png_bytes(image: Image.Image) -> bytes:
    """An RGB image as a PNG with nothing but its pixels: the same image, the same bytes."""
    width, height = image.size
    rows = np.frombuffer(image.tobytes(), np.uint8).reshape(height, width * 3)
    raw = np.empty((height, 1 + width * 3), np.uint8)
    raw[:, 0] = 2  # each row filtered by PNG's "Up": each byte less the one above it (a chart's rows repeat)
    raw[:, 1:] = rows
    raw[1:, 1:] -= rows[:-1]

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 3))
            + chunk(b"IEND", b""))


# ---- drawing ----------------------------------------------------------------------------------------------


@functools.cache
def font(points: float) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans, matplotlib's font, at ``points`` on the canvas (found without importing matplotlib);
    Pillow's own font when matplotlib's is not there."""
    size = round(points * PT)
    spec = importlib.util.find_spec("matplotlib")
    if spec is not None and spec.submodule_search_locations:
        path = Path(spec.submodule_search_locations[0], "mpl-data", "fonts", "ttf", "DejaVuSans.ttf")
        if path.is_file():
            return ImageFont.truetype(str(path), size)
    return ImageFont.load_default(size=size)


def _floats(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1)


@functools.cache
def _width(text: str, points: float) -> float:
    return font(points).getlength(text)


@functools.cache
def _height(points: float) -> float:
    """A line of text's height, ascender to descender."""
    return font(points).getbbox("Ag")[3]


def _text(draw: ImageDraw.ImageDraw, xy, text: str, points: float, align=(0.0, 0.0), colour=BLACK) -> None:
    """``text`` with the point ``xy`` at ``align`` of its box ((0, 0) its top left, (0.5, 0.5) its middle)."""
    x, y = xy
    draw.text((x - align[0] * _width(text, points), y - align[1] * _height(points)), text, fill=colour,
              font=font(points))


def _vertical_text(canvas: Image.Image, centre, text: str, points: float) -> None:
    """``text`` turned 90 degrees (read bottom to top), centred at ``centre``."""
    width, height = math.ceil(_width(text, points)), math.ceil(_height(points))
    tile = Image.new("L", (width, height), 0)
    ImageDraw.Draw(tile).text((0, 0), text, fill=255, font=font(points))
    tile = tile.transpose(Image.Transpose.ROTATE_90)
    canvas.paste(BLACK, (round(centre[0] - height / 2), round(centre[1] - width / 2)), tile)


def _hairline(draw: ImageDraw.ImageDraw, start, end, colour: str = BLACK) -> None:
    """A line one image pixel wide from ``start`` to ``end`` (level or upright) on whole image pixels: the frame,
    ticks and grid (0.6-0.8 pt, a pixel at 110 dpi), crisp as matplotlib snaps them."""
    (x0, y0), (x1, y1) = start, end
    first = (min(x0, x1) // SCALE * SCALE, min(y0, y1) // SCALE * SCALE)
    last = (max(x0, x1) // SCALE * SCALE + SCALE - 1, max(y0, y1) // SCALE * SCALE + SCALE - 1)
    draw.rectangle((first, last), fill=colour)


def _px(points: float) -> int:
    """A line width in points as whole canvas pixels."""
    return max(1, round(points * PT))


def _runs(points: np.ndarray):
    """The stretches of a polyline between its non-finite points."""
    good = np.isfinite(points).all(axis=1)
    if good.all():
        yield points
        return
    edges = np.flatnonzero(np.diff(np.concatenate(([0], good.astype(np.int8), [0]))))
    for start, stop in zip(edges[::2], edges[1::2]):
        yield points[start:stop]


def _dashes(points: np.ndarray, pattern: np.ndarray):
    """The pieces of a polyline its on-off ``pattern`` (canvas pixels) leaves drawn."""
    along = np.concatenate(([0.0], np.cumsum(np.hypot(*np.diff(points, axis=0).T))))
    period = float(pattern.sum())
    offsets = np.concatenate(([0.0], np.cumsum(pattern)))[:-1:2]
    starts = (np.arange(math.ceil(along[-1] / period))[:, None] * period + offsets).ravel()
    starts = starts[starts < along[-1]]
    ends = np.minimum(starts + np.resize(pattern[::2], starts.size), along[-1])
    first, last = np.searchsorted(along, starts, "right"), np.searchsorted(along, ends, "left")
    xs, ys = points[:, 0], points[:, 1]
    a = np.column_stack((np.interp(starts, along, xs), np.interp(starts, along, ys)))
    b = np.column_stack((np.interp(ends, along, xs), np.interp(ends, along, ys)))
    for i in range(starts.size):
        yield np.vstack((a[i], points[first[i]:last[i]], b[i]))


def _simplify(points: np.ndarray) -> np.ndarray:
    """The polyline on whole canvas pixels, without repeated points or the inner points of straight stretches
    (a CDF's thousands of points are a few hundred corners): the same drawing, far fewer joints to draw."""
    p = np.round(points)
    p = p[np.concatenate(([True], (np.diff(p, axis=0) != 0).any(axis=1)))]
    if p.shape[0] < 3:
        return p
    before, after = p[1:-1] - p[:-2], p[2:] - p[1:-1]
    straight = (before[:, 0] * after[:, 1] == before[:, 1] * after[:, 0]) & ((before * after).sum(axis=1) > 0)
    return p[np.concatenate(([True], ~straight, [True]))]


def _polyline(draw: ImageDraw.ImageDraw, points: np.ndarray, style: Style) -> None:
    """A polyline in ``style`` (a NaN breaks it), its dashes measured along its length; round joints (a disc at
    each corner, as matplotlib joins) on a line wide enough to show them."""
    width = _px(style.width)
    pattern = np.asarray(style.dashes, dtype=np.float64) * style.width * PT
    r = width / 2
    for run in _runs(points):
        run = _simplify(run)
        if run.shape[0] < 2:
            continue
        for piece in _dashes(run, pattern) if pattern.size else (run,):
            draw.line(piece.ravel().tolist(), fill=style.colour, width=width)
            if width > 2 * SCALE:  # over two image pixels
                for x, y in piece[1:-1].tolist():
                    draw.ellipse((x - r, y - r, x + r, y + r), fill=style.colour)


def _markers(draw: ImageDraw.ImageDraw, points: np.ndarray, style: Style) -> None:
    """Hollow markers at ``points``; their outline is stroked across the marker's edge, as matplotlib's."""
    edge = _px(MARKER_EDGE)
    reach = (MARKER_SIZE * PT + edge) / 2  # to the outer side of the outline
    for x, y in points[np.isfinite(points).all(axis=1)]:
        if style.marker == "o":
            draw.ellipse((x - reach, y - reach, x + reach, y + reach), outline=style.colour, width=edge)
        else:
            shape = [(x + 2 * reach * u, y - 2 * reach * v) for u, v in MARKERS[style.marker]]
            draw.polygon(shape, outline=style.colour, width=edge)


def _step_points(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The corners of a post-step curve through (x, y)."""
    return np.repeat(x, 2)[1:], np.repeat(y, 2)[:-1]


class _Layout:
    """Where everything of a chart goes on a canvas of ``size`` pixels, and the drawing of it."""

    def __init__(self, chart: Chart, size: tuple[int, int]):
        self.chart, (self.width, self.height) = chart, size
        rows = self.rows()
        self.yticks = [self.ticks_up(p, upper, lower) for p, (upper, lower) in zip(chart.panels, rows)]
        widest = max((_width(t, TEXT_PT) / PT for _, labels in self.yticks for t in labels), default=0.0)
        line = _height(TEXT_PT) / PT
        left = PAD + (line + LABEL_PAD if any(p.ylabel for p in chart.panels) else 0) + widest + TICK_PAD + TICK
        xs = [s.x for p in chart.panels for s in p.series if s.kind != "hline"]
        xscale = data_range(np.concatenate(xs) if xs else np.empty(0), chart.xlog)
        right = self.ticks_across(xscale, left * PT)
        for p, (upper, lower) in zip(chart.panels, rows):  # on whole image pixels, as the frame is drawn
            p.xscale = xscale
            p.box = tuple(round(v / SCALE) * SCALE for v in (left * PT, upper * PT, right, lower * PT))

    def rows(self) -> list[tuple[float, float]]:
        """Each panel's top and bottom (points): the title above, x labels and the note below, a gap between."""
        chart, line = self.chart, _height(TEXT_PT) / PT
        top = PAD + (_height(TITLE_PT) / PT + TITLE_PAD if chart.title else 0)
        bottom = PAD + TICK + TICK_PAD + line + (LABEL_PAD + line if chart.xlabel else 0) \
            + (_height(SMALL_PT) / PT if chart.note else 0)
        gap = PAD + TICK
        free = self.height / PT - top - bottom - gap * (len(chart.panels) - 1)
        rows = []
        for p in chart.panels:
            height = free * p.height / sum(q.height for q in chart.panels)
            rows.append((top, top + height))
            top += height + gap
        return rows

    @staticmethod
    def ticks_up(p: Panel, upper: float, lower: float) -> tuple[np.ndarray, list[str]]:
        """Sets the panel's y scale (its ``ylim``, else its data's range); its major ticks and their labels,
        as many as matplotlib fits (one per two font sizes of height)."""
        values = np.concatenate([s.y for s in p.series]) if p.series else np.empty(0)
        p.yscale = Scale(*p.ylim) if p.ylim else data_range(values, False)
        major = linear_ticks(p.yscale.lo, p.yscale.hi, min(MOST_TICKS, max(1, int((lower - upper) / 20))))
        return major, p.yscale.labels(major)

    def ticks_across(self, xscale: Scale, left: float) -> float:
        """Sets the x ticks (as many as matplotlib fits: one per three font sizes of width); returns the panels'
        right edge (canvas pixels), drawn in so no tick label passes the margin."""
        right = self.width - PAD * PT
        self.xticks = xscale.ticks(min(MOST_TICKS, max(2, int((right - left) / PT / 30))))
        for f, text in zip(xscale.fraction(self.xticks[0]), xscale.labels(self.xticks[0])):
            if f > 0:  # the label's right end, left + f * (right - left) + half its width, within the margin
                right = min(right, (self.width - PAD * PT - _width(text, TEXT_PT) / 2 - left * (1 - f)) / f)
        return right

    def draw(self, canvas: Image.Image) -> None:
        """The panels (series, frame, ticks, labels, legend, message), then the title, x label and note."""
        chart, draw = self.chart, ImageDraw.Draw(canvas)
        for p, (ymajor, _) in zip(chart.panels, self.yticks):
            self.plot_area(draw, p, ymajor)
        self.clip(draw)
        for i, (p, (ymajor, ylabels)) in enumerate(zip(chart.panels, self.yticks)):
            self.frame(draw, p, ymajor, ylabels, labelled_x=i == len(chart.panels) - 1)
            if p.ylabel:
                widest = max((_width(t, TEXT_PT) for t in ylabels), default=0.0)
                right = p.box[0] - (TICK + TICK_PAD + LABEL_PAD) * PT - widest
                _vertical_text(canvas, (right - _height(TEXT_PT) / 2, (p.box[1] + p.box[3]) / 2), p.ylabel, TEXT_PT)
            if p.message:
                _text(draw, ((p.box[0] + p.box[2]) / 2, (p.box[1] + p.box[3]) / 2), p.message, TEXT_PT, (0.5, 0.5))
            if p.legend:
                self.legend(canvas, p)
        first, last = chart.panels[0].box, chart.panels[-1].box
        if chart.title:
            _text(draw, ((first[0] + first[2]) / 2, first[1] - TITLE_PAD * PT), chart.title, TITLE_PT, (0.5, 1.0))
        if chart.xlabel:
            below = last[3] + (TICK + TICK_PAD + LABEL_PAD) * PT + _height(TEXT_PT)
            _text(draw, ((last[0] + last[2]) / 2, below), chart.xlabel, TEXT_PT, (0.5, 0.0))
        if chart.note:
            _text(draw, (0.01 * self.width, 0.99 * self.height), chart.note, SMALL_PT, (0.0, 1.0), NOTE_GREY)

    def plot_area(self, draw: ImageDraw.ImageDraw, p: Panel, ymajor: np.ndarray) -> None:
        """The panel's grid and series (``clip`` then trims what strays past its box)."""
        left, top, right, bottom = p.box
        for x in left + p.xscale.fraction(self.xticks[0]) * (right - left):
            _hairline(draw, (x, top), (x, bottom), GRID)
        for y in bottom - p.yscale.fraction(ymajor) * (bottom - top):
            _hairline(draw, (left, y), (right, y), GRID)

        def place(x, y):
            return np.column_stack((left + p.xscale.fraction(x) * (right - left),
                                    bottom - p.yscale.fraction(y) * (bottom - top)))

        for s in p.series:
            if s.kind == "hline":
                _polyline(draw, place(np.array([p.xscale.lo, p.xscale.hi]), np.repeat(s.y, 2)), s.style)
                continue
            if s.kind == "step":  # on whole image pixels, as matplotlib snaps a path of level and upright steps
                _polyline(draw, np.round(place(*_step_points(s.x, s.y)) / SCALE) * SCALE, s.style)
            else:
                _polyline(draw, place(s.x, s.y), s.style)
            if s.style.marker and s.marks is not None:
                _markers(draw, place(s.x[s.marks], s.y[s.marks]), s.style)

    def clip(self, draw: ImageDraw.ImageDraw) -> None:
        """Paint white all the canvas but the panels' boxes: a line or marker at the edge of a panel's range is
        cut at its box, as matplotlib clips it (a panel's range holds its data, so none strays into another's)."""
        boxes = [p.box for p in self.chart.panels]
        left, right = boxes[0][0], boxes[0][2]
        draw.rectangle((0, 0, left, self.height), fill=WHITE)
        draw.rectangle((right, 0, self.width, self.height), fill=WHITE)
        rows = [0.0] + [edge for box in boxes for edge in (box[1], box[3])] + [float(self.height)]
        for top, bottom in zip(rows[::2], rows[1::2]):
            draw.rectangle((0, top, self.width, bottom), fill=WHITE)

    def frame(self, draw: ImageDraw.ImageDraw, p: Panel, ymajor, ylabels, labelled_x: bool) -> None:
        """The panel's box, its ticks (outward) and their labels (x ones on the lowest panel only)."""
        left, top, right, bottom = p.box
        for start, end in (((left, top), (right, top)), ((left, bottom), (right, bottom)),
                           ((left, top), (left, bottom)), ((right, top), (right, bottom))):
            _hairline(draw, start, end)
        major, minor = self.xticks
        xs = left + p.xscale.fraction(major) * (right - left)
        for x in left + p.xscale.fraction(minor) * (right - left):
            _hairline(draw, (x, bottom), (x, bottom + MINOR_TICK * PT))
        for x in xs:
            _hairline(draw, (x, bottom), (x, bottom + TICK * PT))
        for y, text in zip(bottom - p.yscale.fraction(ymajor) * (bottom - top), ylabels):
            _hairline(draw, (left - TICK * PT, y), (left, y))
            _text(draw, (left - (TICK + TICK_PAD) * PT, y), text, TEXT_PT, (1.0, 0.5))
        if not labelled_x:
            return
        row = bottom + (TICK + TICK_PAD) * PT
        labels = list(zip(xs, p.xscale.labels(major)))
        if p.xscale.log and major.size < 2:  # too few powers of ten in view: the minor ticks are labelled too
            labels += zip(left + p.xscale.fraction(minor) * (right - left), p.xscale.labels(minor))
        taken: list[tuple[float, float]] = []
        for x, text in labels:  # in order of importance; one that would overlap a label placed is left out
            half = _width(text, TEXT_PT) / 2 + TICK_PAD * PT
            if all(x + half <= a or x - half >= b for a, b in taken):
                taken.append((x - half, x + half))
                _text(draw, (x, row), text, TEXT_PT, (0.5, 0.0))

    def legend(self, canvas: Image.Image, p: Panel) -> None:
        """A box of line samples and labels in a corner of the panel (matplotlib's spacings, in font sizes)."""
        entries = [s for s in p.series if s.label]
        if not entries:
            return
        em = p.legend_pt * PT
        row = _height(p.legend_pt)
        text_x = (0.4 + 2.0 + 0.8) * em  # border pad, sample, gap to the text
        width = text_x + max(_width(s.label, p.legend_pt) for s in entries) + 0.4 * em
        height = 0.8 * em + len(entries) * row + (len(entries) - 1) * 0.5 * em
        right = p.box[2] - 0.5 * em
        top = p.box[1] + 0.5 * em + LEGEND_CORNERS[p.legend] * (p.box[3] - p.box[1] - em - height)
        box = tuple(round(v) for v in (right - width, top, right, top + height))
        behind = canvas.crop(box)  # the frame is white at alpha 0.8: the curves show faintly through it
        canvas.paste(Image.blend(behind, Image.new("RGB", behind.size, WHITE), 0.8), box[:2])
        draw = ImageDraw.Draw(canvas)
        draw.rounded_rectangle(box, radius=0.2 * em, outline=LEGEND_EDGE, width=_px(1.0))
        for i, s in enumerate(entries):
            y = box[1] + 0.4 * em + i * (row + 0.5 * em) + row / 2
            sample = np.array([[box[0] + 0.4 * em, y], [box[0] + 2.4 * em, y]])
            _polyline(draw, sample, s.style)
            if s.style.marker:
                _markers(draw, sample.mean(axis=0, keepdims=True), s.style)
            _text(draw, (box[0] + text_x, y), s.label, p.legend_pt, (0.0, 0.5))
