"""The Pillow charts of a run's delay_cdf.png and imbalance.png (tools/results/chart.py): ticks, the mapping
from data to pixels, curves where they must be, the PNG bytes, and the texts results.py gives them."""

import io
import math
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from PIL import Image

from fedemu.tools.results import chart
from fedemu.tools.results.results import LINE_STYLES, balance_chart, cdf_chart, plot_balance, plot_cdfs

BLUE, ORANGE = (0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E)


def near(colour, target, slack=40) -> bool:
    return all(abs(a - b) <= slack for a, b in zip(colour, target))


def at(image: Image.Image, xy) -> tuple:
    return image.getpixel((round(xy[0]), round(xy[1])))


def chunks(png: bytes) -> list[bytes]:
    """The chunk types of a PNG file, in order."""
    kinds, i = [], 8
    while i < len(png):
        (length,) = struct.unpack(">I", png[i:i + 4])
        kinds.append(png[i + 4:i + 8])
        i += 12 + length
    return kinds


# ---- ticks ---------------------------------------------------------------------------------------------


def test_linear_ticks_of_known_ranges_are_matplotlibs():
    assert chart.linear_ticks(0.0, 1.02).tolist() == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert chart.compact(chart.linear_ticks(0.0, 1.02)) == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
    ticks = chart.linear_ticks(126792.2, 158818.9)  # the balance plot's time axis of a Pigeon run
    assert chart.compact(ticks) == [str(t) for t in range(130000, 155001, 5000)]
    assert chart.compact(chart.linear_ticks(-0.0125, 0.2625, 5)) == ["0.0", "0.1", "0.2"]  # a low panel: few
    assert chart.compact(chart.linear_ticks(-0.3, 0.3)) == ["−0.3", "−0.2", "−0.1", "0.0", "0.1", "0.2", "0.3"]
    assert chart.compact(np.array([0.0, 0.25, 0.5])) == ["0.00", "0.25", "0.50"]


@settings(max_examples=400, deadline=None)
@given(lo=st.floats(-1e6, 1e6), span=st.floats(1e-6, 1e7))
def test_linear_ticks_are_nice_cover_the_range_and_are_labelled_apart(lo, span):
    hi = lo + span
    assume(span >= 1e-6 * max(abs(lo), abs(hi)))  # a range the labels can still tell apart
    ticks = chart.linear_ticks(lo, hi)
    assert 3 <= ticks.size <= 10
    step = ticks[1] - ticks[0]
    assert np.allclose(np.diff(ticks), step, rtol=1e-6, atol=0)
    power = 10.0 ** math.floor(math.log10(step) + 1e-9)
    nice = min((1, 2, 2.5, 5), key=lambda m: abs(step / power - m)) * power
    assert step == pytest.approx(nice, rel=1e-6)  # 1, 2, 2.5 or 5 x 10^k
    assert np.allclose(ticks / nice, np.round(ticks / nice), rtol=1e-9, atol=1e-6)  # multiples of the step
    slack = 1e-9 * max(abs(lo), abs(hi), step)
    assert lo - slack <= ticks[0] < lo + step + slack and hi - step - slack < ticks[-1] <= hi + slack
    labels = chart.compact(ticks)
    assert len(set(labels)) == len(labels)
    assert [float(t.replace("−", "-")) for t in labels] == pytest.approx(ticks.tolist(), abs=step / 100)


def test_log_ticks_are_the_decades_in_range_and_the_steps_between():
    major, minor = chart.log_ticks(10 ** -3.3, 10 ** 3.3)
    assert major.tolist() == pytest.approx([1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3])
    assert [chart.power_label(t) for t in major] == ["10⁻³", "10⁻²", "10⁻¹", "10⁰", "10¹", "10²", "10³"]
    assert minor.size == 6 * 8 + 2 * 2  # 2..9 x each of six whole decades, 2 and 3 x 10^-4 and x 10^3
    assert chart.power_label(2e-3) == "2×10⁻³" and chart.power_label(3.0) == "3×10⁰"
    major, minor = chart.log_ticks(1e-7, 1e9)  # 17 powers of ten: every other one is labelled
    assert major.tolist() == pytest.approx([10.0 ** e for e in range(-6, 9, 2)])
    assert minor.tolist() == pytest.approx([10.0 ** e for e in range(-7, 10, 2)])


@settings(max_examples=300, deadline=None)
@given(low=st.floats(-12, 12), decades=st.floats(0.2, 20))
def test_log_ticks_are_powers_of_ten_within_the_range(low, decades):
    lo, hi = 10.0 ** low, 10.0 ** (low + decades)
    major, minor = chart.log_ticks(lo, hi)
    exps = np.log10(major)
    assert np.allclose(exps, np.round(exps), atol=1e-9) and major.size <= chart.MOST_TICKS
    for ticks in (major, minor):  # a power of ten within 1e-9 (in log10) of an end counts as in range
        assert ((low - 2e-9 <= np.log10(ticks)) & (np.log10(ticks) <= low + decades + 2e-9)).all()
    powers = [e for e in range(math.ceil(low - 1e-9), math.floor(low + decades + 1e-9) + 1)]
    if len(powers) <= chart.MOST_TICKS:  # every power of ten in range, and between them 2..9 x each
        assert np.round(exps).astype(int).tolist() == powers
        coeff = minor / 10.0 ** np.floor(np.log10(minor) + 1e-9)
        assert np.allclose(coeff, np.round(coeff)) and set(np.round(coeff).astype(int)) <= set(range(2, 10))
    else:  # every stride-th power, the others minor
        assert len(major) + len(minor) == len(powers) and len(major) >= 2


# ---- data to pixels ------------------------------------------------------------------------------------


def test_the_scales_put_known_values_at_known_places():
    log = chart.Scale(1e-3, 1e3, log=True)
    assert log.fraction([1e-3, 1e-2, 1.0, 1e3]).tolist() == pytest.approx([0, 1 / 6, 0.5, 1])
    assert np.isnan(log.fraction(-1.0)) and not np.isfinite(log.fraction(0.0))  # nowhere on a log axis
    assert chart.Scale(-1.0, 3.0).fraction([-1.0, 0.0, 3.0]).tolist() == pytest.approx([0, 0.25, 1])
    fitted = chart.data_range(np.array([1.0, 100.0, np.nan]), log=True)  # matplotlib's margins: 5% either side
    assert (fitted.lo, fitted.hi) == pytest.approx((10 ** -0.1, 10 ** 2.1))
    fitted = chart.data_range(np.array([0.0, 10.0]), log=False)
    assert (fitted.lo, fitted.hi, fitted.log) == pytest.approx((-0.5, 10.5, False))
    assert chart.data_range(np.array([5.0]), log=True).fraction(5.0) == pytest.approx(0.5)  # a decade each side
    assert chart.data_range(np.array([]), log=True) == chart.Scale(0.0, 1.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1e-9, 1e9), min_size=2, max_size=30), st.booleans())
def test_the_mapping_is_monotone(values, log):
    values = np.sort(np.array(values))
    scale = chart.data_range(values, log)
    f = scale.fraction(values)
    assert (np.diff(f) >= -1e-12).all() and (f >= 0).all() and (f <= 1).all()


def cdf_image(series, log=True):
    figure = cdf_chart(series, "delay (s)", log, title="t")
    return figure, figure.render()


def test_a_drawn_cdf_is_where_its_curve_must_be():
    """1..100 once each: the CDF holds k/100 from x = k to k + 1, so at x = k + 0.5 the curve is at height
    k/100, in the first colour, and well above or below it there is none."""
    figure, image = cdf_image({"a": np.arange(1.0, 101.0), "b": np.arange(1.0, 11.0) * 10})
    panel = figure.panels[0]
    for k in (15, 35, 55, 75, 95):
        assert near(at(image, panel.pixel(k + 0.5, k / 100)), BLUE), k
        for dy in (-0.12, 0.12):
            assert not near(at(image, panel.pixel(k + 0.5, k / 100 + dy)), BLUE), (k, dy)
    assert near(at(image, panel.pixel(45.0, 0.4)), ORANGE)  # the second series: 10, 20, ..., 100
    assert image.size == (770, 528)
    left, top, right, bottom = (v / chart.SCALE for v in panel.box)
    assert at(image, ((left + right) / 2, bottom)) == (0, 0, 0) == at(image, (left, (top + bottom) / 2))  # frame


def test_each_series_gets_a_style_of_its_own():
    figure = cdf_chart({f"s{i}": [1.0, 2.0, 3.0] for i in range(len(LINE_STYLES))}, "x")
    styles = [s.style for s in figure.panels[0].series]
    assert [s.colour for s in styles] == list(chart.TAB10[:len(styles)])
    assert len({s.dashes for s in styles}) == len({s.marker for s in styles}) == len(styles)
    assert all(s.marker in chart.MARKERS or s.marker == "o" for s in styles)
    assert [s.marks for s in figure.panels[0].series][:2] == [slice(0, None, 1), slice(0, None, 1)]


def test_a_dashed_line_has_gaps_its_pattern_long():
    panel = chart.Panel(ylim=(0.0, 1.0))
    panel.line([0.0, 1.0], [0.5, 0.5], chart.Style(chart.TAB10[0], 2.0, chart.dash_pattern("--")))
    figure = chart.Chart(7, 4.8, [panel])
    image = figure.render()
    left, _, right, _ = panel.box
    row = round(panel.pixel(0.0, 0.5)[1])
    inked = [near(image.getpixel((x, row)), BLUE, 60) for x in range(round(left / 2) + 2, round(right / 2) - 2)]
    runs = np.diff(np.flatnonzero(np.diff(np.array(inked, dtype=np.int8))))
    period = sum(chart.DASHES["--"]) * 2.0 * chart.DPI / 72  # in image pixels
    assert len(runs) > 20 and abs(np.median(runs[:-1] + runs[1:]) - period) <= 1.5  # a dash and a gap
    assert chart.dash_pattern((0, (5, 1))) == (5, 1) and chart.dash_pattern("-") == ()
    with pytest.raises(ValueError, match="offsets"):
        chart.dash_pattern((2, (5, 1)))


def ink(image: Image.Image, box, colour=None, slack=60) -> np.ndarray:
    """The (row, column) offsets inside ``box`` (image pixels) of pixels near ``colour``, or of any not white."""
    a = np.asarray(image.crop(tuple(round(v) for v in box))).astype(int)
    hit = (np.abs(a - colour) <= slack).all(axis=2) if colour else (a < 200).any(axis=2)
    return np.argwhere(hit)


def test_a_line_is_cut_at_its_panels_box():
    panel = chart.Panel(ylim=(0.0, 1.0))
    panel.line([0.0, 1.0], [0.0, 0.0], chart.Style(chart.TAB10[0], 4.0))  # on the lower edge, 6 px wide
    image = chart.Chart(7, 4.8, [panel]).render()
    left, top, right, bottom = (v / chart.SCALE for v in panel.box)
    assert len(ink(image, (left + 10, bottom - 3, right - 10, bottom), BLUE)) > 0  # the half inside
    assert len(ink(image, (left + 10, bottom + 1, right - 10, bottom + 6), BLUE)) == 0  # the half outside


def test_the_legend_is_in_its_corner():
    """The CDF's legend lower right, the balance plot's upper right: each with its line sample and its text."""
    figure = cdf_chart({"a": np.arange(1.0, 101.0)}, "delay (s)")  # nothing of the curve low at the right
    image = figure.render()
    left, top, right, bottom = (v / chart.SCALE for v in figure.panels[0].box)
    corner = (right - 150, bottom - 40, right, bottom)
    assert len(ink(image, corner, BLUE)) > 20 and len(ink(image, corner, (0, 0, 0))) > 20
    assert len(ink(image, (left + 3, bottom - 40, left + 150, bottom - 3), (0, 0, 0))) == 0  # no text lower left
    figure = balance_chart(np.arange(50.0), np.linspace(1, 0, 50), np.linspace(0.3, 0, 50))  # falling: upper
    image = figure.render()  # right free
    for panel in figure.panels:
        left, top, right, bottom = (v / chart.SCALE for v in panel.box)
        corner = (right - 180, top, right, top + 35)
        assert len(ink(image, corner, BLUE)) > 10 and len(ink(image, corner, (0x66, 0x66, 0x66), 20)) > 10
        assert len(ink(image, (right - 180, bottom - 35, right - 3, bottom - 3), (0, 0, 0))) == 0


def test_the_title_and_axis_labels_sit_round_the_panel():
    figure = cdf_chart({"a": [1.0, 2.0]}, "delay in job response time (s)", title="Job delay: megha, seed 1")
    image = figure.render()
    left, top, right, bottom = (v / chart.SCALE for v in figure.panels[0].box)
    title = ink(image, (left, 0, right, top - 1))
    assert 200 < np.ptp(title[:, 1]) < 400 and np.ptp(title[:, 0]) < 20  # one line of text, centred
    assert abs(left + title[:, 1].mean() - (left + right) / 2) < 20
    xlabel = ink(image, (left, bottom + 25, right, image.height))
    assert 150 < np.ptp(xlabel[:, 1]) < 350 and np.ptp(xlabel[:, 0]) < 20
    ylabel = ink(image, (0, top, 25, bottom))  # "CDF", turned: taller than wide, at the middle
    assert np.ptp(ylabel[:, 0]) > 2 * np.ptp(ylabel[:, 1]) and abs(top + ylabel[:, 0].mean() - (top + bottom) / 2) < 5


def test_a_nan_breaks_a_line():
    t = np.arange(100.0)
    values = np.full(100, 0.5)
    values[40:60] = np.nan
    figure = balance_chart(t, values, values)
    image = figure.render()
    top = figure.panels[0]
    assert near(at(image, top.pixel(20, 0.5)), BLUE) and near(at(image, top.pixel(80, 0.5)), BLUE)
    gap = (top.pixel(39.3, 0)[0], top.box[1] / chart.SCALE + 2, top.pixel(59.7, 0)[0], top.box[3] / chart.SCALE - 2)
    assert len(ink(image, gap, BLUE)) == 0  # nothing of the line between the last point before and the first after


# ---- what results.py draws -----------------------------------------------------------------------------


def test_the_png_is_plain_deterministic_and_of_the_stated_size(tmp_path):
    series = {"all": np.linspace(0.01, 50, 300), "short": np.linspace(0.01, 20, 200)}
    for name in ("a.png", "b.png"):
        plot_cdfs(tmp_path / name, series, "delay (s)", title="Job delay")
        plot_balance(tmp_path / ("bal_" + name), np.arange(50.0), np.linspace(0, 1, 50), np.linspace(0, 0.2, 50),
                     title="Balance")
    for first, size in (("a.png", (770, 528)), ("bal_a.png", (770, 572))):
        png = (tmp_path / first).read_bytes()
        assert png == (tmp_path / first.replace("a.png", "b.png")).read_bytes()
        assert chunks(png) == [b"IHDR", b"IDAT", b"IEND"]  # no time, no software, nothing but the pixels
        with Image.open(io.BytesIO(png)) as image:
            assert image.size == size and image.mode == "RGB"
    figure = cdf_chart(series, "delay (s)")
    with Image.open(io.BytesIO(figure.png())) as decoded:
        assert decoded.tobytes() == figure.render().tobytes()


def test_the_legend_and_note_say_what_they_said(tmp_path):
    figure = cdf_chart({"megha": [0.0, -1.0, 0.5, 10.0], "pigeon": [1.0, 2.0], "none": []}, "delay (s)", title="T")
    assert [s.label for s in figure.panels[0].series] == ["megha (n=4, 2 at <= 0)", "pigeon (n=2)"]
    assert figure.note == "values <= 0 (e.g. a zero delay) are drawn at 1e-06 on the log axis"
    assert figure.panels[0].series[0].x[0] == 1e-6 and figure.xlog and figure.title == "T"
    linear = cdf_chart({"u": [0.0, 0.5]}, "utilization", log=False)
    assert linear.note == "" and not linear.xlog and linear.panels[0].series[0].label == "u (n=2)"
    balance = balance_chart(np.arange(4.0), np.array([0.0, 1.0, 1.0, 0.0]), np.array([0.1, 0.2, 0.3, 0.4]))
    assert [[s.label for s in p.series] for p in balance.panels] == [["imbalance Im(t)", "mean 0.5"],
                                                                     ["utilization variance", "mean 0.25"]]
    assert [p.ylabel for p in balance.panels] == ["imbalance Im(t)", "utilization variance"]


def test_a_value_at_or_below_zero_on_the_log_axis_writes_the_note_under_the_plot():
    def inked_below(figure):
        image = figure.render()
        strip = image.crop((0, round(figure.panels[0].box[3] / chart.SCALE) + 45, 300, image.height))
        return int((np.asarray(strip) != 255).any(axis=2).sum())

    with_zero = cdf_chart({"a": [0.0, 1.0, 2.0]}, "delay (s)")
    without = cdf_chart({"a": [0.5, 1.0, 2.0]}, "delay (s)")
    assert with_zero.note and not without.note
    assert inked_below(with_zero) > 100 and inked_below(without) == 0


def test_no_data_is_said_in_the_middle(tmp_path):
    for figure in (cdf_chart({}, "delay (s)"), cdf_chart({"a": []}, "delay (s)"),
                   balance_chart(np.empty(0), np.empty(0), np.empty(0))):
        image = figure.render()
        for panel in figure.panels:
            assert panel.message == "no data" and not panel.series
            left, top, right, bottom = (v / chart.SCALE for v in panel.box)
            middle = image.crop((round((left + right) / 2) - 30, round((top + bottom) / 2) - 8,
                                 round((left + right) / 2) + 30, round((top + bottom) / 2) + 8))
            assert np.asarray(middle).sum(axis=2).min() < 100  # dark text
    plot_cdfs(tmp_path / "empty.png", {}, "delay (s)")
    assert (tmp_path / "empty.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_another_suffix_is_refused_and_nothing_written(tmp_path):
    with pytest.raises(ValueError, match="PNG only"):
        plot_cdfs(tmp_path / "cdf.svg", {"a": [1.0]}, "delay (s)")
    assert list(tmp_path.iterdir()) == []


def test_the_font_is_matplotlibs_and_pillows_own_stands_in(monkeypatch):
    def forget():  # the fonts and the text sizes measured with them
        for cached in (chart.font, chart._width, chart._height):
            cached.cache_clear()

    assert chart.font(10).getname() == ("DejaVu Sans", "Book")
    forget()
    monkeypatch.setattr(chart.importlib.util, "find_spec", lambda name: None)
    try:
        assert chart.font(10).getname()[0] != "DejaVu Sans"
        assert cdf_chart({"a": [1.0, 2.0]}, "delay (s)").render().size == (770, 528)
    finally:
        forget()


def test_drawing_imports_no_matplotlib(tmp_path):
    """The point of the module: a run's two plots without matplotlib's import."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from fedemu.tools.results import results\n"
            f"results.plot_cdfs({str(tmp_path / 'c.png')!r}, {{'a': [0.0, 1.0]}}, 'x')\n"
            f"results.plot_balance({str(tmp_path / 'b.png')!r}, np.arange(3.0), np.ones(3), np.ones(3))\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib was imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent)
