"""End-to-end tests of `arca ui` in Debian's Chromium (headless, driven by Playwright).

Started by crates/arca-ui/tests/e2e.rs, which serves a repository holding two snapshots of
the every-entry-kind tree and passes the server through the environment:
ARCA_UI_URL (with the token), ARCA_UI_BASE, ARCA_UI_SRC (the tree backed up), ARCA_UI_TMP
(a scratch folder), ARCA_UI_CHROMIUM (the browser) and ARCA_UI_SHOTS (screenshot folder).
"""

import os
import time
import urllib.parse

import pytest
from playwright.sync_api import expect, sync_playwright

URL = os.environ["ARCA_UI_URL"]
BASE = os.environ["ARCA_UI_BASE"]
SRC = os.environ["ARCA_UI_SRC"]
TMP = os.environ["ARCA_UI_TMP"]
SHOTS = os.environ["ARCA_UI_SHOTS"]


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=os.environ["ARCA_UI_CHROMIUM"],
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(browser):
    ctx = browser.new_context(accept_downloads=True, viewport={"width": 1100, "height": 760})
    pg = ctx.new_page()
    pg.set_default_timeout(20000)
    yield pg
    ctx.close()


def shot(page, name, full=False):
    page.screenshot(path=os.path.join(SHOTS, name + ".png"), full_page=full)


def test_a_request_without_the_token_is_refused(browser):
    ctx = browser.new_context()
    pg = ctx.new_page()
    r = pg.goto(BASE + "/snapshots")
    assert r.status == 401
    expect(pg.get_by_role("alert")).to_contain_text("this page needs the access token")
    r = pg.goto(BASE + "/api/overview")
    assert r.status == 401
    ctx.close()


def test_the_token_opens_the_overview(page):
    page.goto(URL)
    # The token left the address bar for a cookie.
    assert page.url == BASE + "/"
    expect(page.get_by_role("heading", level=1)).to_have_text("Repository overview")
    expect(page.locator(".cards")).to_contain_text("Snapshots")
    # Keyboard: the first Tab reaches the skip link, which moves focus to the content.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    shot(page, "overview")


def test_browse_a_snapshot_by_clicking(page):
    page.goto(BASE + "/")
    page.get_by_role("link", name="Snapshots", exact=True).first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Snapshots")
    rows = page.locator("tbody tr")
    # The fixture's two, and an older one of another host (see e2e.rs).
    expect(rows).to_have_count(3)
    shot(page, "snapshots")
    rows.first.get_by_role("link", name="Browse").click()
    # Walk down to the backed-up folder, one folder link at a time.
    for name in [c for c in SRC.split("/") if c]:
        page.get_by_role("link", name=name + "/", exact=True).click()
    expect(page.get_by_role("navigation", name="Folder path")).to_contain_text(os.path.basename(SRC))
    table = page.locator("table")
    for entry in ["small.txt", "dir/", "sticky/", "link-rel", "fifo", "name with spaces", "unicode-✓-名前"]:
        expect(table).to_contain_text(entry)
    expect(table).to_contain_text("drwxrwxrwt")
    shot(page, "browse")


def test_download_a_file(page):
    page.goto(BASE + "/snapshots/latest?path=" + urllib.parse.quote(SRC))
    for name, rel in [("small.txt", "small.txt")]:
        with page.expect_download() as d:
            page.get_by_role("link", name="Download " + name, exact=True).click()
        got = open(d.value.path(), "rb").read()
        assert got == open(os.path.join(SRC, rel), "rb").read()
        assert d.value.suggested_filename == name
    page.get_by_role("link", name="dir/", exact=True).click()
    page.get_by_role("link", name="nested/", exact=True).click()
    with page.expect_download() as d:
        page.get_by_role("link", name="Download random.bin", exact=True).click()
    assert open(d.value.path(), "rb").read() == open(os.path.join(SRC, "dir/nested/random.bin"), "rb").read()


def wait_done(page):
    state = page.locator('[data-field="state"]').first
    expect(state).to_have_text("done", timeout=30000)


def test_restore_a_folder_dry_run_first(page):
    page.goto(BASE + "/snapshots/latest?path=" + urllib.parse.quote(SRC))
    page.get_by_role("checkbox", name="Select dir", exact=True).check()
    page.get_by_role("button", name="Restore the selected entries…").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Restore from snapshot")
    target = os.path.join(TMP, "restored-ui")
    page.get_by_label("Target folder").fill(target)
    page.get_by_label("Files that already exist").select_option("if-changed")
    shot(page, "restore")
    page.get_by_role("button", name="Preview (dry run)").click()
    page.wait_for_url("**/jobs/*")
    wait_done(page)
    expect(page.locator("main")).to_contain_text("Would restore")
    expect(page.locator("main")).to_contain_text("text.log")
    assert not os.path.exists(target), "a dry run changes nothing"
    shot(page, "restore-preview")
    page.get_by_role("button", name="Restore now").click()
    page.wait_for_url("**/jobs/*")
    wait_done(page)
    expect(page.locator("main")).to_contain_text("Restored")
    assert os.path.isfile(os.path.join(target, SRC.lstrip("/"), "dir", "text.log"))


def test_backup_of_a_profile_reaches_100_percent(page):
    page.goto(BASE + "/backup")
    expect(page.locator("table")).to_contain_text("home")
    shot(page, "backup")
    page.get_by_role("button", name="Back up now").click()
    page.wait_for_url("**/jobs/*")
    seen = []
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            v = page.evaluate("(() => { const p = document.querySelector('progress'); return p && p.hasAttribute('value') ? p.value : null })()")
            state = page.locator('[data-field="state"]').first.text_content()
        except Exception:
            # The page reloads itself when the job ends, to show the result.
            time.sleep(0.05)
            continue
        seen.append(v)
        if state == "done":
            break
        time.sleep(0.05)
    page.wait_for_load_state()
    wait_done(page)
    value = page.evaluate("document.querySelector('progress').value")
    assert value == 1, seen
    expect(page.locator("main")).to_contain_text("Snapshot")
    expect(page.locator("main")).to_contain_text("saved")
    shot(page, "backup-done")
    # The job survives a reload and is listed.
    page.reload()
    expect(page.locator('[data-field="state"]').first).to_have_text("done")
    page.goto(BASE + "/jobs")
    expect(page.locator("table")).to_contain_text("backup of profile home")


def test_forget_preview_and_errors(page):
    page.goto(BASE + "/forget")
    page.get_by_label("Keep the last").fill("2")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("main")).to_contain_text("Remove 1 snapshot:")
    page.get_by_role("heading", name="Preview", exact=True).scroll_into_view_if_needed()
    shot(page, "forget")
    page.get_by_label("Keep the last").fill("-7")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_role("alert")).to_contain_text("invalid keep count")
    # Grouped by nothing (`group_by=`): the job groups as the preview did. The page's script
    # left the empty field out, and the job, grouping by host and paths, refused ("the
    # snapshots changed since the preview").
    page.goto(BASE + "/forget?preview=1&keep_last=1&group_by=")
    expect(page.locator("main")).to_contain_text("Remove ")
    page.locator("button.danger").click()
    page.wait_for_url("**/jobs/*")
    wait_done(page)
    r = page.goto(BASE + "/snapshots/nothing-like-this")
    assert r.status == 404
    expect(page.get_by_role("alert")).to_contain_text("no snapshot matches")


def test_phone_width(browser):
    ctx = browser.new_context(viewport={"width": 390, "height": 800}, is_mobile=True)
    pg = ctx.new_page()
    pg.goto(URL)
    pg.goto(BASE + "/snapshots/latest?path=" + urllib.parse.quote(SRC))
    # Nothing wider than the screen but the tables, which scroll in their own box.
    width = pg.evaluate("document.documentElement.scrollWidth")
    assert width <= 392, width
    shot(pg, "phone")
    ctx.close()
