"""``harel monitor`` as a user sees it: headless chromium against the real server, over
SQLite, PostgreSQL and Redis.

Each backend gets one dataset and one monitor process for the whole module; its orders are
run through the durable runner (``order.stm``) before the first test.  Only the live-update
test writes afterwards, and it adds no execution.
"""

from __future__ import annotations

import os
import shutil
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from harel.engine.dsl import definition_from_dsl_file
from harel.engine.runner import DurableRunner
from harel.examples import ORDER_STM
from harel.model import Event
from harel.store.contract import ExecutionStore

from .conftest import serve_monitor

if TYPE_CHECKING:
    from playwright.sync_api import Page

OpenBackend = Callable[[str], tuple[ExecutionStore, str | None]]

SCRIPT = "<script>window.__xss=1</script>"
IMAGE = "<img src=x onerror=window.__xss=1>"
XSS_ID = f"xss-{IMAGE}"
"""An execution id that is markup: it must show as these characters, never as an image."""

MIDWAY = "order-1"
"""Confirmed and paid, still being picked: the chart lights Fulfilment and its Warehouse."""
LIVE = "order-live"
"""Confirmed only: the live-update test pays it while its page is open."""
ROOTS = {MIDWAY, "order-2", "order-3", "order-4", "order-5", LIVE, XSS_ID}
DONE_ROOTS = {"order-2", "order-3"}
README_SHOT = Path(__file__).resolve().parents[4] / "docs" / "monitor.png"
"""Written only when HAREL_README_SCREENSHOT=1 (the README's picture; sqlite run)."""

# Every test runs once per backend; a backend's dataset and monitor are shared by its tests.
pytestmark = pytest.mark.parametrize(
    "site",
    ["sqlite", "postgres", "redis"],
    indirect=True,
    scope="module",
)


class Clock:
    """A clock the seeding moves by hand, starting three hours ago, so
    the orders it finishes by their timers end near the present."""

    def __init__(self) -> None:
        self.now = time.time() - 3 * 3600

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float = 60.0) -> None:
        """Move the clock ``seconds`` on."""
        self.now += seconds


@dataclass
class Site:
    """One backend's dataset behind one running monitor."""

    backend: str
    base: str
    runner: DurableRunner

    def url(self, path: str) -> str:
        """The absolute address of ``path`` on this monitor."""
        return self.base + path


def execution_path(execution_id: str) -> str:
    """The page of ``execution_id`` (the id percent-encoded as one path segment)."""
    return "/executions/" + urllib.parse.quote(execution_id, safe="")


def seed(runner: DurableRunner, clock: Clock) -> None:
    """The module's executions, every one of :data:`ROOTS` at its stage: two finished by
    their timers (order-2 delivered, order-3 expired), the others running."""
    pay = Event(kind="Pay", data={"amount": 42.5})
    stages: dict[str, list[Event]] = {
        MIDWAY: [Event(kind="Confirm"), pay],
        "order-2": [Event(kind="Confirm"), pay, Event(kind="Pack")],
        "order-3": [],
        LIVE: [Event(kind="Confirm")],
    }
    for execution_id, events in stages.items():
        runner.create("order", execution_id=execution_id, context={"customer": execution_id})
        for event in events:
            clock.tick()
            runner.process(execution_id, event)
            runner.run_until_idle()
    clock.tick(7200)
    assert runner.fire_due_timers() == 2  # order-2's delivery, order-3's expiry
    clock.now = max(clock.now, time.time())  # the rest is placed now: its timers are ahead
    for execution_id in ("order-4", "order-5"):
        runner.create("order", execution_id=execution_id, context={"customer": execution_id})
    runner.create("order", execution_id=XSS_ID, context={"note": SCRIPT, "image": IMAGE})


@pytest.fixture(scope="module")
def site(
    request: pytest.FixtureRequest,
    chromium: str,
    open_module_backend: OpenBackend,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Site]:
    """A seeded dataset of the backend and ``harel monitor`` serving it."""
    backend: str = request.param
    store, url = open_module_backend(backend)
    assert url is not None, f"{backend} cannot be opened by another process"
    definitions = tmp_path_factory.mktemp(f"definitions-{backend}")
    shutil.copy(ORDER_STM, definitions / "order.stm")
    order = definition_from_dsl_file(ORDER_STM)
    clock = Clock()
    runner = DurableRunner(store, {order.id: order}, trace=True, clock=clock)
    with serve_monitor(url, definitions, definitions / "monitor.log") as monitor:
        seed(runner, clock)  # while the monitor starts up
        yield Site(backend=backend, base=monitor.wait_until_serving(), runner=runner)


def row_ids(page: Page) -> list[str]:
    """The ids of the execution rows on a list page, top to bottom."""
    return [str(row.get_attribute("data-id")) for row in page.get_by_test_id("execution-row").all()]


def xss_ran(page: Page) -> Any:
    """What the payload would have set (``None`` while it never ran)."""
    return page.evaluate("() => window.__xss === undefined ? null : window.__xss")


def test_the_list_filters_by_definition_and_status(
    page: Page, site: Site, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    page.goto(site.url("/"))
    everything = row_ids(page)
    assert set(everything) >= ROOTS
    assert len(everything) == len(ROOTS) + 6  # three forked orders, two regions each
    assert page.locator("main img").count() == 0  # the markup id is text
    page.screenshot(path=screenshots / f"{site.backend}-list.png")

    page.fill("#filter-definition", "order")
    page.select_option("#filter-status", "DONE")
    page.check("#filter-roots")
    page.click("#filter-apply")
    page.wait_for_url("**status=DONE**")
    assert set(row_ids(page)) == DONE_ROOTS
    expect(page.locator("#filter-status")).to_have_value("DONE")

    page.get_by_test_id("count-RUNNING").click()  # keeps the definition and roots filters
    page.wait_for_url("**status=RUNNING**")
    assert set(row_ids(page)) == ROOTS - DONE_ROOTS

    page.fill("#filter-definition", "no-such-machine")
    page.click("#filter-apply")
    expect(page.get_by_test_id("no-executions")).to_be_visible()
    assert row_ids(page) == []


def test_next_page_walks_every_root_once(page: Page, site: Site) -> None:
    page.goto(site.url("/?definition=order&roots=1&limit=3"))
    pages = [row_ids(page)]
    while page.get_by_test_id("next-page").count():
        with page.expect_navigation():
            page.get_by_test_id("next-page").click()
        pages.append(row_ids(page))
        assert page.get_by_test_id("first-page").count() == 1
    assert [len(ids) for ids in pages] == [3, 3, 1]
    walked = [execution_id for ids in pages for execution_id in ids]
    assert sorted(walked) == sorted(ROOTS)


def test_an_execution_opened_from_its_row(page: Page, site: Site, screenshots: Path) -> None:
    from playwright.sync_api import expect

    page.goto(site.url("/?definition=order&roots=1"))
    page.locator(f'[data-testid="execution-row"][data-id="{MIDWAY}"] a').first.click()
    page.wait_for_url(f"**/executions/{MIDWAY}")
    expect(page.get_by_test_id("execution-id")).to_have_text(MIDWAY)
    expect(page.get_by_test_id("status")).to_have_text("RUNNING")
    expect(page.get_by_test_id("version")).to_have_text("3")

    steps = [
        [cell.strip() for cell in row.locator("td").all_inner_texts()[2:4]]
        for row in page.get_by_test_id("timeline-row").all()
    ]
    assert [event.split(" ")[0] for event, _ in steps] == ["Start", "Confirm", "Finished"]
    assert [move for _, move in steps] == [
        "- → Placed",
        "Placed → Fulfilment",
        "Fulfilment → Fulfilment",
    ]
    assert '"amount": 42.5' in steps[2][0]  # the paid region's outcome, carried to the join

    chart = page.get_by_test_id("chart").locator("svg")
    expect(chart).to_be_visible()
    for lit in ("Fulfilment", "Fulfilment.Warehouse"):
        expect(chart.locator(f'.active[data-path="{lit}"]')).to_have_count(1)
    for dark in ("Placed", "Fulfilment.Payment", "Shipping"):
        expect(chart.locator(f'[data-path="{dark}"]')).to_have_count(1)
        expect(chart.locator(f'.active[data-path="{dark}"]')).to_have_count(0)
    page.screenshot(path=screenshots / f"{site.backend}-execution.png")
    if site.backend == "sqlite" and os.environ.get("HAREL_README_SCREENSHOT") == "1":
        page.screenshot(path=README_SHOT)

    page.get_by_test_id("child-row").filter(has_text="Warehouse").locator("a").click()
    page.wait_for_url("**/executions/order-1%3AFulfilment.Warehouse%3A0")
    expect(page.get_by_test_id("parent")).to_have_text(MIDWAY)
    picking = '.active[data-path="Fulfilment.Warehouse.Picking"]'
    expect(page.get_by_test_id("chart").locator(picking)).to_have_count(1)


def test_a_commit_shows_up_without_reloading(page: Page, site: Site) -> None:
    from playwright.sync_api import expect

    page.goto(site.url(execution_path(LIVE)))
    version = page.get_by_test_id("version")
    expect(version).to_have_text("2")
    expect(page.get_by_test_id("timeline-row")).to_have_count(2)

    site.runner.process(LIVE, Event(kind="Pay", data={"amount": 7.5}))
    site.runner.run_until_idle()  # the paid region finishes: the order steps (version 3)

    expect(version).to_have_text("3", timeout=15_000)  # the page's own poll brought it
    expect(page.get_by_test_id("timeline-row")).to_have_count(3)
    expect(page.get_by_test_id("timeline-row").last).to_contain_text('"amount": 7.5')


def test_markup_in_ids_and_context_renders_as_text(page: Page, site: Site) -> None:
    from playwright.sync_api import expect

    page.goto(site.url("/?definition=order&roots=1"))
    rows = page.get_by_test_id("execution-row")
    expect(rows.filter(has_text=XSS_ID)).to_have_count(1)
    rows.filter(has_text=XSS_ID).locator("a").first.click()
    page.wait_for_url("**/executions/xss-*")
    expect(page.get_by_test_id("execution-id")).to_have_text(XSS_ID)
    context = page.locator("#context").inner_text()
    assert SCRIPT in context and IMAGE in context
    assert page.locator("main img, main script").count() == 0
    assert xss_ran(page) is None

    page.goto(site.url("/"))
    page.fill("#search-id", SCRIPT)
    page.click("#search-go")
    expect(page.get_by_test_id("not-found")).to_contain_text(SCRIPT)
    assert page.locator("main img, main script").count() == 0
    assert xss_ran(page) is None
