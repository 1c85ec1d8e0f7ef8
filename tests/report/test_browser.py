"""The report in a real browser: headless Chromium (Debian's package) opens the file from disk,
takes a screenshot, and the test checks that the plots rendered (their colours are on screen, and
vanish when the SVGs are taken out), that the console stayed empty and that no request left the
page: Chromium is pointed at a proxy on 127.0.0.1 that records every request it gets. A control
page (an image URL and a console.error, no CSP) proves both detectors fire."""

import http.server
import os
import re
import shutil
import subprocess
import threading

import pytest

from pipeline.report import write_report

from reportkit import make_run

pytestmark = pytest.mark.slow

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
PLOT_BLUE = (0x1F, 0x77, 0xB4)  # pipeline.report.plots.COLORS[0]
PLOT_RED = (0xD6, 0x27, 0x28)
# Chromium's own traffic, whatever the page (seen with an empty page and every background switch off):
# sign-in and network-time probes. Anything else the proxy sees came from the page.
BROWSER_OWN = re.compile(r"^(CONNECT (accounts|www)\.google\.com:443|GET http://clients2\.google\.com/time/)")
QUIET = ("--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
         "--disable-extensions", "--disable-client-side-phishing-detection", "--disable-domain-reliability", "--no-pings",
         "--safebrowsing-disable-auto-update", "--no-default-browser-check", "--dns-prefetch-disable",
         "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate,"
         "AutofillServerCommunication,DialMediaRouteProvider,PreconnectToSearch,DnsOverHttps")


@pytest.fixture(scope="module")
def chromium():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed: apt-get install chromium")
    return CHROMIUM


class Recorder(http.server.BaseHTTPRequestHandler):
    def _record(self):
        request = "{} {}".format(self.command, self.path)
        if not BROWSER_OWN.match(request):
            self.server.requests.append(request)
        self.send_response(404)
        self.end_headers()

    do_GET = do_POST = do_HEAD = do_CONNECT = _record

    def log_message(self, *args):
        pass


@pytest.fixture
def proxy():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def screenshot(chromium, page, png, proxy, size=(1200, 5200)):
    """Open ``page`` (a file) in headless Chromium; returns the console messages it logged."""
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", *QUIET,
            "--user-data-dir={}".format(png.parent / (png.stem + "-profile")),
            "--enable-logging=stderr", "--v=0", "--proxy-server=http://127.0.0.1:{}".format(proxy.server_address[1]),
            "--proxy-bypass-list=<-loopback>", "--window-size={},{}".format(*size), "--screenshot={}".format(png),
            page.resolve().as_uri()]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert png.exists(), res.stderr[-2000:]
    return [line for line in res.stderr.splitlines() if ":CONSOLE" in line]


def colour_pixels(png, rgb, tolerance=40):
    from PIL import Image
    import numpy as np

    image = np.asarray(Image.open(png).convert("RGB")).astype(int)
    return int((np.abs(image - np.array(rgb)).sum(axis=2) < tolerance).sum())


def ink(png):
    """Fraction of pixels that are not (near) white."""
    from PIL import Image
    import numpy as np

    image = np.asarray(Image.open(png).convert("L"))
    return float((image < 235).mean())


def test_the_detectors_fire_on_a_control_page(chromium, proxy, tmp_path):
    page = tmp_path / "control.html"
    page.write_text('<!DOCTYPE html><html><body><p>control</p><img src="http://example.invalid/pixel.png">'
                    '<script>console.error("control error")</script></body></html>')
    console = screenshot(chromium, page, tmp_path / "control.png", proxy, size=(400, 300))
    assert any("control error" in line for line in console), console
    assert any("example.invalid" in r for r in proxy.requests), proxy.requests


def test_report_renders_its_plots_offline_without_console_errors(chromium, proxy, tmp_path):
    nights = tmp_path / "nightly"
    for i, day in enumerate(("2026-11-21", "2026-11-22", "2026-11-23")):
        make_run(nights / day, medians={1: 4.0 + 0.2 * i, 8: 20.0 - i}, seed=i, finished=day + "T02:00:00+0000")
    run = make_run(tmp_path / "runs" / "jetson_tx2", finished="2026-11-24T02:00:00+0000")
    report = write_report(run, history=[nights])
    png = tmp_path / "report.png"
    console = screenshot(chromium, report, png, proxy)
    assert console == []
    assert proxy.requests == []
    assert ink(png) > 0.02
    blue, red = colour_pixels(png, PLOT_BLUE), colour_pixels(png, PLOT_RED)
    assert blue > 2000 and red > 1000, (blue, red)

    # the same page without its SVGs: the plot colours are gone, so they were the plots
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r"<svg.*?</svg>", "", report.read_text(), flags=re.S))
    screenshot(chromium, bare, tmp_path / "bare.png", proxy)
    assert colour_pixels(tmp_path / "bare.png", PLOT_BLUE) < blue / 20


def test_each_plot_renders_on_its_own(chromium, proxy, tmp_path):
    run = make_run(tmp_path / "tx2")
    page = write_report(run, history=[make_run(tmp_path / "older", seed=5, finished="2026-11-20T02:00:00+0000")]).read_text()
    head = page[:page.index("<body>")]
    plots = re.findall(r'<div class="plot">(<svg.*?</svg>)</div>', page, flags=re.S)
    assert len(plots) == 5  # latency CDF, throughput, power, training, trends
    for i, svg in enumerate(plots):
        single = tmp_path / "plot{}.html".format(i)
        single.write_text(head + "<body>" + svg + "</body></html>")
        png = tmp_path / "plot{}.png".format(i)
        assert screenshot(chromium, single, png, proxy, size=(900, 900)) == []
        assert ink(png) > 0.005, "plot {} is blank".format(i)
        assert colour_pixels(png, PLOT_BLUE) + colour_pixels(png, (0x2C, 0xA0, 0x2C)) > 150, "plot {} has no data drawn".format(i)
    assert proxy.requests == []
