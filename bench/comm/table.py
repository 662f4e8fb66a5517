"""Markdown tables from bench/comm/run.sh's CSV: time per op (ms) and GB/s, one row per size."""
import csv
import sys
from collections import defaultdict

rows = list(csv.DictReader(open(sys.argv[1])))
backends = ["zmq", "mpi-tcp", "mpi-shm", "local"]
data = defaultdict(dict)
for r in rows:
    data[(r["op"], int(r["ranks"]), int(r["bytes"]))][r["backend"]] = (float(r["seconds"]), float(r["GBps"]))

def size(b):
    return f"{b >> 20} MB" if b >= 1 << 20 else f"{b >> 10} KB"

for op in ["all_reduce", "all_gather"]:
    for p in [2, 4]:
        keys = sorted(k for k in data if k[0] == op and k[1] == p)
        if not keys:
            continue
        print(f"\n**{op}, {p} ranks** (ms per op / GB/s; zmq/mpi-tcp = ZeroMQ time over Open MPI TCP time)\n")
        print("| size | " + " | ".join(backends) + " | zmq/mpi-tcp |")
        print("|---:|" + "---:|" * (len(backends) + 1))
        for k in keys:
            cells = []
            for b in backends:
                v = data[k].get(b)
                cells.append(f"{v[0] * 1e3:.3f} / {v[1]:.2f}" if v else "-")
            z, m = data[k].get("zmq"), data[k].get("mpi-tcp")
            ratio = f"{z[0] / m[0]:.2f}" if z and m else "-"
            print(f"| {size(k[2])} | " + " | ".join(cells) + f" | {ratio} |")
