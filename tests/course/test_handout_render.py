"""`make handouts` and `make figures`: every handout renders to a page of its own with links
between pages rewritten and checked, the images the handouts show exist and are copied,
a broken link fails the build, and every figure script draws its figure."""

from __future__ import annotations

import re

import pytest

from grader.handouts import figures, pdf, render
from grader.handouts.figures import ring
from tests.conftest import KIT_ROOT

HANDOUTS = KIT_ROOT / "handouts"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("handouts")
    return out, render.build(HANDOUTS, out)


def test_every_handout_becomes_a_page(built):
    out, pages = built
    assert sorted(p.stem for p in pages) == sorted(p.stem for p in HANDOUTS.glob("*.md"))
    overview = (out / "overview.html").read_text(encoding="utf-8")
    assert "<title>Overview and set-up</title>" in overview
    assert '<a href="part1-gemm.html">part1-gemm.md</a>' in overview  # rewritten link
    assert 'aria-current="page">Overview</a>' in overview            # the navigation bar
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert not re.search(r'href="[^"#:]+\.md[#"]', html), f"{page.name}: a .md link left"
        assert "http://" not in html.split("<main>")[0] and "https://" not in \
            html.split("<main>")[0], "the page template must not fetch anything"
        for target in re.findall(r'(?:href|src)="([^"#:]+)', html):
            assert (out / target).is_file(), f"{page.name}: {target} not in the build"


def test_formulas_and_tables_render(built):
    out, _ = built
    part2 = (out / "part2-network.html").read_text(encoding="utf-8")
    assert "dZ_L = ∂J/∂Z_L = (P − Y) / n" in part2  # a formula block, kept as text
    assert "<table>" in part2 and "<code>u · |z + b|</code>" in part2  # an escaped pipe
    assert 'id="the-network-with-samples-as-rows"' in part2  # headings carry anchors
    part3 = (out / "part3-mpi.html").read_text(encoding="utf-8")
    toc = part3.split('<nav class="toc"')[1].split("</nav>")[0]  # under the title
    assert part3.index("</h1>") < part3.index('<nav class="toc"')
    assert '<a href="#scaling">Scaling</a>' in toc and 'id="scaling"' in part3
    assert '<nav class="toc"' not in (out / "reports.html").read_text(encoding="utf-8")


def test_every_image_a_handout_shows_exists():
    shown = [(path.name, target) for path in sorted(HANDOUTS.glob("*.md"))
             for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", path.read_text())]
    assert len(shown) >= 10
    for name, target in shown:
        assert (HANDOUTS / target).is_file(), f"{name} shows {target}, which is missing"


def test_a_broken_link_fails_the_build(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\n[b](b.md#there) [gone](gone.md) ![x](img/x.png) "
                              "[self](#nowhere) [web](https://example.org)\n")
    (src / "b.md").write_text("# B\n\n## Here\n\n[back](a.md#a)\n")
    with pytest.raises(render.BrokenLinkError) as caught:
        render.build(src, tmp_path / "out")
    message = str(caught.value)
    for problem in ("b.md has no heading for #there", "gone.md, which is not a handout",
                    "img/x.png does not exist", "no heading makes #nowhere"):
        assert problem in message
    assert not (tmp_path / "out" / "a.html").exists()  # nothing written on failure
    (src / "a.md").write_text("# A\n\n[b](b.md#here)\n")
    render.build(src, tmp_path / "out")
    assert '<a href="b.html#here">b</a>' in (tmp_path / "out" / "a.html").read_text()


def test_headings_get_githubs_anchors():
    assert render.slug("Version 4 (bonus): hierarchical tiling") == \
        "version-4-bonus-hierarchical-tiling"
    assert render.slug("`mpi_2_ring.py`: an all-reduce by hand") == \
        "mpi_2_ringpy-an-all-reduce-by-hand"


def test_every_figure_script_draws_and_the_handouts_show_it(tmp_path):
    drawn = figures.draw_all(tmp_path, dpi=20)
    assert [p.name for p in drawn] == list(figures.FIGURES)
    for path in drawn:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (HANDOUTS / "img" / path.name).is_file(), f"run make figures: {path.name}"
    shown = "".join(p.read_text() for p in HANDOUTS.glob("*.md"))
    for name in figures.FIGURES:
        assert f"(img/{name})" in shown, f"no handout shows {name}"


@pytest.mark.parametrize("p", [2, 3, 4, 5])
def test_ring_figure_follows_the_handouts_schedule(p):
    """The simulation the figure draws: after the reduce-scatter rank r holds the whole sum
    of chunk r + 1, after the all-gather every rank holds every sum, and rank r never sends
    chunk r + 1 in the reduce-scatter nor chunk r + 2 in the all-gather (Part 3's count)."""
    steps = ring.schedule(p)
    assert len(steps) == 2 * (p - 1)
    everyone = frozenset(range(p))
    after_rs = steps[p - 2].held
    for r in range(p):
        assert after_rs[r][(r + 1) % p] == everyone
        assert {s.sent[r] for s in steps[:p - 1]} == set(range(p)) - {(r + 1) % p}
        assert {s.sent[r] for s in steps[p - 1:]} == set(range(p)) - {(r + 2) % p}
    assert all(chunk == everyone for row in steps[-1].held for chunk in row)


def test_tiling_figure_uses_the_starters_tile_sizes():
    """The register-tiling figure draws version 3 as starter/gemm_3_register.py sizes it."""
    import ast

    from grader.handouts.figures import tiling
    from nnkit.submission import NAMED

    tree = ast.parse((NAMED["starter"] / "gemm_3_register.py").read_text())
    values: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:  # module constants, possibly computed from earlier ones
                values[node.targets[0].id] = eval(compile(ast.Expression(node.value), "",
                                                          "eval"), {}, dict(values))
            except NameError:
                pass  # not a plain constant
    assert (tiling.TILE_M, tiling.TILE_N, tiling.STEP_K) == \
        (values["TILE_M"], values["TILE_N"], values["TILE_K"])
    assert (values["THREADS_X"], values["THREADS_Y"]) == (16, 4)  # the (16, 4) block drawn


@pytest.mark.skipif(not pdf.available(), reason="no Chromium")
def test_a_page_prints_to_pdf(built, tmp_path):
    out, _ = built
    printed = pdf.print_pdf(out / "reports.html", tmp_path / "reports.pdf")
    data = printed.read_bytes()
    assert data.startswith(b"%PDF-") and b"/Type /Page" in data
