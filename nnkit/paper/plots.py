"""The figures of the benchmark, the learning-rate grid and leapfrogging (PNG, log scales).

Drawn with matplotlib's object API (no pyplot state), as the rest of the kit does.
"""

from __future__ import annotations

from pathlib import Path

MARKERS = "osD^v<>phX*P8"


def _figure(panels: int, rows: int = 1, width: float = 6.0, height: float = 4.2):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * panels, height * rows), layout="constrained")
    axes = fig.subplots(rows, panels, squeeze=False)
    return fig, axes


def _series(rows: list[dict], net: str, key: str) -> dict[str, tuple[list, list]]:
    out: dict[str, tuple[list, list]] = {}
    for r in rows:
        if r["net"] == net and r.get(key):
            xs, ys = out.setdefault(r["impl"], ([], []))
            xs.append(r["batch"])
            ys.append(r[key])
    return out


def _style(index: int, device: str) -> dict:
    """A colour and marker of its own for each implementation; GPU ones dashed."""
    from matplotlib import colormaps

    return {"color": colormaps["tab20"](index % 20), "marker": MARKERS[index % len(MARKERS)],
            "ls": "--" if device == "gpu" else "-"}


def _save(fig, path: Path, title: str) -> None:
    import textwrap

    fig.suptitle("\n".join(textwrap.wrap(title.replace("$", r"\$"), 150)), fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def bench_figures(rows: list[dict], nets: list[str], peaks: dict[str, float], out: Path,
                  subtitle: str) -> list[Path]:
    """time.png, gflops.png (with a roofline per device) and speedup.png."""
    paths = []
    specs = [("time.png", [("seconds_per_epoch", "seconds per epoch")]),
             ("gflops.png", [("gflops", "GFLOP/s")]),
             ("speedup.png", [("speedup_serial", "speedup over its serial counterpart"),
                              ("speedup_naive", "speedup over naive serial")])]
    for name, keys in specs:
        fig, axes = _figure(len(nets), rows=len(keys))
        for row, (key, label) in enumerate(keys):
            for col, net in enumerate(nets):
                ax = axes[row][col]
                devices = {r["impl"]: r.get("device", "cpu") for r in rows}
                order = list(dict.fromkeys(r["impl"] for r in rows))
                for impl, (xs, ys) in _series(rows, net, key).items():
                    ax.plot(xs, ys, label=impl, **_style(order.index(impl), devices[impl]))
                if key == "gflops":
                    for j, (device, rate) in enumerate(peaks.items()):
                        ax.axhline(rate, ls="--", lw=1, color=f"C{(j + 7) % 10}",
                                   label=f"roofline: {device} SGEMM {rate:,.0f}")
                if key.startswith("speedup"):
                    ax.axhline(1.0, color="#999999", lw=0.8)
                ax.set_xscale("log", base=2)
                batches = sorted({r["batch"] for r in rows if r["net"] == net})
                ax.set_xticks(batches, [str(b) for b in batches])
                ax.minorticks_off()
                ax.set_yscale("log")
                ax.set_xlabel("minibatch size")
                ax.set_ylabel(label)
                ax.set_title(f"{net}: {label}")
                ax.grid(alpha=0.3, which="both")
                ax.legend(fontsize=6, ncols=2)
        path = out / name
        _save(fig, path, subtitle)
        paths.append(path)
    return paths


def tune_figure(rows: list[dict], path: Path, title: str) -> Path:
    fig, axes = _figure(1)
    ax = axes[0][0]
    for i, net in enumerate(dict.fromkeys(r["net"] for r in rows)):
        mine = [r for r in rows if r["net"] == net]
        ax.plot([r["lr"] for r in mine], [100 * r["val_accuracy"] for r in mine],
                marker=MARKERS[i], label=net)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("validation accuracy, %")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    _save(fig, path, title)
    return path


def leapfrog_figure(rows: list[dict], path: Path, title: str) -> Path:
    """Measured saving against the formula's, one panel per net, for each k and variant."""
    nets = list(dict.fromkeys(r["net"] for r in rows))
    cols = min(3, len(nets))
    fig, axes = _figure(cols, rows=-(-len(nets) // cols), width=4.2, height=3.4)
    for index, net in enumerate(nets):
        ax = axes[index // cols][index % cols]
        mine = [r for r in rows if r["net"] == net]
        ks = sorted({r["k"] for r in mine})
        for device, style in (("cpu", "k--"), ("gpu", "k:")):
            pts = [r for r in mine if (r["variant"] == "streams") == (device == "gpu")]
            if pts:
                first = pts[0]
                ax.plot(ks, [100 * (1 - 1 / k) * first["f3"] / first["f"] for k in ks], style,
                        label=f"formula (1-1/k) f3/f, {device.upper()}")
        for i, variant in enumerate(dict.fromkeys(r["variant"] for r in mine)):
            pts = [r for r in mine if r["variant"] == variant]
            ax.plot([r["k"] for r in pts], [100 * r["saving"] for r in pts],
                    marker=MARKERS[i], color=f"C{i}", label=f"measured, {variant}")
            if any(abs(r["bound_saving"] - r["predicted"]) > 1e-9 for r in pts):
                ax.plot([r["k"] for r in pts], [100 * r["bound_saving"] for r in pts], ":",
                        color=f"C{i}", label=f"best on these cores, {variant}")
        ax.axhline(0, color="#999999", lw=0.8)
        ax.set_xticks(ks)
        ax.set_xlabel("threads or streams k")
        ax.set_ylabel("saving on a pass, %")
        ax.set_title(f"{net} (hidden layers x width)", fontsize=9)
        ax.grid(alpha=0.3)
        if index == 0:
            ax.legend(fontsize=6)
    for index in range(len(nets), len(axes) * cols):
        axes[index // cols][index % cols].set_visible(False)
    _save(fig, path, title)
    return path
