"""Summary of bench/dct/adaptive_links.sh: time to the uncompressed run's final P@1, off vs auto."""
import glob
import json
import os
import sys

out = sys.argv[1]


def epochs(name):
    path = os.path.join(out, name + ".jsonl")
    if not os.path.exists(path):
        return None
    return [r for r in map(json.loads, open(path)) if r.get("event") == "epoch"]


def start(name):
    path = os.path.join(out, name + ".jsonl")
    return next((r for r in map(json.loads, open(path)) if r.get("event") == "start"), {}) if os.path.exists(path) else {}


def time_to(ep, target):
    """Cumulative train + eval seconds to the first epoch at or above target (None: never)."""
    t = 0.0
    for e in ep:
        t += e["train_seconds"] + e.get("eval_seconds", 0.0)
        if e["p@1"] >= target - 1e-9:
            return t
    return None


print("## DCT-MP: whole runs through the link (3 epochs)\n")
print("| link | ranks | seed | off: final P@1, s | auto: final P@1, s, bytes/sample | auto reaches off's final P@1 after | ratio |")
print("|---|---|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(out, "mp*-off-s*.jsonl"))):
    name = os.path.basename(f)[:-6]
    if name.endswith(".rank1") or ".rank" in name:
        continue
    off = epochs(name)
    auto = epochs(name.replace("-off-", "-auto-"))
    if not off or not auto:
        continue
    m, _, seed, link = name.split("-", 3)
    target = off[-1]["p@1"]
    t_off = time_to(off, target)
    t_auto = time_to(auto, target)
    ratio = f"{t_auto / t_off:.2f}" if t_auto else "never"
    print(f"| {link} | {m[2:]} | {seed[1:]} | {target:.4f}, {t_off:.1f} | {auto[-1]['p@1']:.4f}, "
          f"{sum(e['train_seconds'] + e.get('eval_seconds', 0) for e in auto):.1f}, {auto[-1]['mp_bytes_sent_per_sample']:.0f} "
          f"(off {off[-1]['mp_bytes_sent_per_sample']:.0f}) | {t_auto if t_auto is None else round(t_auto, 1)} s | {ratio} |")

print("\n## DCT-DP: steps timed through the link, P@1 per epoch from loopback (seed 1)\n")
print("| link | ranks | off s/step | auto s/step: first steps, then settled | default chose | off: epochs to its final P@1 | auto: epochs to it (final P@1, compression) | est. time to accuracy, auto / off |")
print("|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(out, "dp*-off-time-*.jsonl"))):
    name = os.path.basename(f)[:-6]
    if ".rank" in name:
        continue
    n = int(name.split("-")[0][2:])
    link = name.split("-time-")[1]
    off_t, auto_t = epochs(name), epochs(name.replace("-off-", "-auto-"))
    long_t = epochs(name.replace("-off-time-", "-auto-time100-"))
    link_s = start(name.replace("-off-", "-link-"))
    off_q, auto_q = epochs(f"dp{n}-off-loopback"), epochs(f"dp{n}-auto-loopback")
    if not off_t or not auto_t or not long_t or not off_q or not auto_q:
        continue
    s_off = off_t[0]["train_seconds"] / off_t[0]["steps"]
    first, t_first = auto_t[0]["steps"], auto_t[0]["train_seconds"]
    settled = (long_t[0]["train_seconds"] - t_first) / (long_t[0]["steps"] - first)
    per_epoch = off_q[0]["steps"]
    target = off_q[-1]["p@1"]
    e_off = next(i + 1 for i, e in enumerate(off_q) if e["p@1"] >= target - 1e-9)
    e_auto = next((i + 1 for i, e in enumerate(auto_q) if e["p@1"] >= target - 1e-9), None)
    if e_auto:
        steps = e_auto * per_epoch
        t_auto = t_first + max(0, steps - first) * settled
        est = f"{t_auto / (e_off * per_epoch * s_off):.2f}"
    else:
        est = "never"
    print(f"| {link} | {n} | {s_off:.3f} | {t_first / first:.3f}, {settled:.3f} | {link_s.get('compress_chosen', '?')} | "
          f"{e_off} (P@1 {target:.4f}) | {e_auto} ({auto_q[-1]['p@1']:.4f}, {auto_q[-1]['dp_compression']:.1f}x) | {est} |")
