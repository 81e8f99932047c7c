#!/usr/bin/env python3
"""Plots bench/results.csv: one PNG per op, TFLOPS against N (ms where the op has no FLOP count,
as top-k), one line per remaining shape, for one commit's run. Rows whose shape names a
`baseline=` are the anchors of that run, drawn dashed beside ours in the same colour; a commit
without baseline rows gets ours only.

    python3 scripts/plot_results.py [--csv bench/results.csv] [--out docs/bench] [--commit C]

By default each op shows the latest commit that has rows for it. Needs matplotlib.
"""

import argparse
import collections
import csv
import pathlib
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def parse_shape(shape):
    """'T=4096 N=8192 k=2048 baseline=cub_sort' -> (N, 'T=4096 k=2048', 'cub_sort' or None)."""
    num_keys, baseline, rest = None, None, []
    for word in shape.split():
        key, _, value = word.partition("=")
        if key == "N":
            num_keys = int(value)
        elif key == "baseline":
            baseline = value
        else:
            rest.append(word)
    return num_keys, " ".join(rest), baseline


def natural_key(text):
    """'h=16' before 'h=128': numbers compared as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def load(csv_path):
    """{op: {commit: [row, ...]}} and each commit's latest date."""
    by_op = collections.defaultdict(lambda: collections.defaultdict(list))
    latest = {}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            by_op[row["op"]][row["commit"]].append(row)
            latest[row["commit"]] = max(latest.get(row["commit"], ""), row["date"])
    return by_op, latest


def plot_op(op, rows, commit, out_dir):
    has_tflops = any(row["tflops"] not in ("", "-") for row in rows)
    metric, label = ("tflops", "TFLOPS (valid work)") if has_tflops else ("ms", "ms (median)")
    lines = collections.defaultdict(list)  # (shape, baseline) -> [(N, value)]
    gpu = rows[0]["gpu"]
    for row in rows:
        num_keys, shape, baseline = parse_shape(row["shape"])
        if num_keys is None or row[metric] in ("", "-"):
            continue
        lines[(shape, baseline)].append((num_keys, float(row[metric])))

    figure, axes = plt.subplots(figsize=(7, 4.2))
    colours = {}
    for (shape, baseline), points in sorted(lines.items(),
                                            key=lambda item: (natural_key(item[0][0]), item[0][1] or "")):
        points.sort()
        colour = colours.setdefault(shape, f"C{len(colours)}")
        axes.plot([n for n, _ in points], [v for _, v in points], marker="s" if baseline else "o",
                  linestyle="--" if baseline else "-", color=colour,
                  label=f"{shape} ({baseline})" if baseline else f"{shape} (fp8dsa)")
    axes.set_xscale("log", base=2)
    if not has_tflops:
        axes.set_yscale("log")
    axes.set_xlabel("N (keys)")
    axes.set_ylabel(label)
    axes.set_title(f"{op} on {gpu}, commit {commit}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    path = out_dir / f"{op}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=pathlib.Path, default=ROOT / "bench" / "results.csv")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "bench")
    parser.add_argument("--commit", help="plot this commit's rows (default: each op's latest)")
    args = parser.parse_args()

    by_op, latest = load(args.csv)
    args.out.mkdir(parents=True, exist_ok=True)
    for op, commits in by_op.items():
        commit = args.commit or max(commits, key=lambda c: latest[c])
        if commit not in commits:
            continue
        print(plot_op(op, commits[commit], commit, args.out))


if __name__ == "__main__":
    main()
