#!/usr/bin/env bash
# Decode speed projected for the phones dwell ships manifests for, from what
# a run here measures and what each phone's spec sheet says.
#
#   tests/bench/phone_projection.sh [--hit-rate H] [--storage-efficiency S]
#       [--dram-efficiency D] [--budget-reserve-mb R] [--sparsity X] [--json]
#
# Models (shapes of the real ones, weights at Q4_K_M):
#   moe-30b-a3b  48 layers, hidden 2048, 128 experts of FFN 768, 8 used per
#                token, 32 query / 4 KV heads of 128, vocab 151936
#   dense-32b    64 layers, hidden 5120, FFN 25600, 64 query / 8 KV heads of
#                128, vocab 151936
# Phones: every manifests/*.toml whose [device] gives storage_read_mb_s and
# dram_bandwidth_gb_s; the weight budget is its [memory] budget_mb minus
# --budget-reserve-mb (default 512: KV cache, activations, staging).
#
# The formula, per decoded token:
#   pinned   = the shared weights (embeddings, attention, norms, routers,
#              head), which must fit the budget; the rest of the budget is
#              the expert cache (MoE) or pinned layers (dense)
#   touched  = shared bytes read per token + active expert (or FFN) bytes,
#              times (1 - X) for the projections when sparsity X is given
#   storage  = bytes of the touched streamed weights not resident:
#              MoE: experts per token x expert bytes x (1 - H), with H the
#                   expert-cache hit rate (measured: --hit-rate; default the
#                   cache's share of all experts, i.e. uniform routing)
#              dense: the layers that do not fit the budget, every token
#   t_storage = storage / (storage_read_mb_s x S)   (S: the fraction of the
#               read rate a streaming run reaches here, --storage-efficiency,
#               default 0.8)
#   t_dram    = touched / (dram_bandwidth_gb_s x D)  (D: the fraction of peak
#               DRAM bandwidth a CPU decode reaches, --dram-efficiency,
#               default 0.6; a decode here reaches about 0.8 of the measured
#               bandwidth, and phone CPUs reach less of their peak)
#   tok/s     = 1 / max(t_storage, t_dram) when reads overlap compute (the
#               prefetcher's aim) and 1 / (t_storage + t_dram) when they do
#               not; both are printed.
# Exit status 2 on a bad option.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
hit=""
storage_eff=0.8
dram_eff=0.6
reserve=512
sparsity=0
json=0
while [ $# -gt 0 ]; do
  case $1 in
    --hit-rate) hit=$2; shift 2 ;;
    --storage-efficiency) storage_eff=$2; shift 2 ;;
    --dram-efficiency) dram_eff=$2; shift 2 ;;
    --budget-reserve-mb) reserve=$2; shift 2 ;;
    --sparsity) sparsity=$2; shift 2 ;;
    --json) json=1; shift ;;
    *) echo "phone_projection.sh: unknown option '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
exec python3 - "$root/manifests" "$hit" "$storage_eff" "$dram_eff" "$reserve" "$sparsity" "$json" <<'PY'
import glob, json, os, sys, tomllib

mdir, hit, s_eff, d_eff, reserve, sparsity, as_json = sys.argv[1:]
def num(name, v, lo, hi):
    try:
        x = float(v)
    except ValueError:
        print(f"phone_projection.sh: {name} must be a number, got '{v}'", file=sys.stderr); sys.exit(2)
    if not lo <= x <= hi:
        print(f"phone_projection.sh: {name} must be within {lo}..{hi}, got {v}", file=sys.stderr); sys.exit(2)
    return x
s_eff = num("--storage-efficiency", s_eff, 0.01, 1)
d_eff = num("--dram-efficiency", d_eff, 0.01, 1)
reserve = num("--budget-reserve-mb", reserve, 0, 1 << 20) * 2**20
sparsity = num("--sparsity", sparsity, 0, 0.95)
hit = None if hit == "" else num("--hit-rate", hit, 0, 1)

# Q4_K_M as llama-quantize writes it: most matrices Q4_K (4.5 bits a
# weight), attn_v, part of ffn_down and the output head Q6_K (6.5625); the
# mix averages about 4.85 bits over a model's matrices.
BPW, BPW_HEAD = 4.85, 6.5625
B = lambda params, bpw=BPW: params * bpw / 8

def moe():
    L, H, E, F, K, nq, nkv, hd, V = 48, 2048, 128, 768, 8, 32, 4, 128, 151936
    attn = H * (nq * hd) * 2 + H * (nkv * hd) * 2
    expert = B(3 * H * F)
    shared_layer = B(attn) + B(H * E) + 2 * H * 4
    head = B(V * H, BPW_HEAD)
    embd = B(V * H)
    return dict(name="moe-30b-a3b", layers=L, units=L * E, per_token_units=L * K,
                unit=expert, pinned=embd + head + L * shared_layer,
                shared_touched=head + L * shared_layer + H * 2,  # one embedding row
                total=embd + head + L * (shared_layer + E * expert), moe=True)

def dense():
    L, H, F, nq, nkv, hd, V = 64, 5120, 25600, 64, 8, 128, 151936
    layer = B(H * nq * hd * 2 + H * nkv * hd * 2 + 3 * H * F)
    head = B(V * H, BPW_HEAD)
    embd = B(V * H)
    return dict(name="dense-32b", layers=L, units=L, per_token_units=L, unit=layer,
                pinned=embd + head, shared_touched=head + H * 2,
                total=embd + head + L * layer, moe=False)

phones = []
for f in sorted(glob.glob(os.path.join(mdir, "*.toml"))):
    with open(f, "rb") as fh:
        m = tomllib.load(fh)
    d = m.get("device", {})
    if "storage_read_mb_s" in d and "dram_bandwidth_gb_s" in d:
        phones.append(dict(manifest=os.path.basename(f), name=d.get("name", f),
                           storage=d["storage_read_mb_s"] * 1e6,
                           dram=d["dram_bandwidth_gb_s"] * 1e9,
                           budget=m.get("memory", {}).get("budget_mb", 0) * 2**20))

rows = []
for p in phones:
    for mod in (moe(), dense()):
        budget = p["budget"] - reserve
        row = dict(phone=p["name"], manifest=p["manifest"], model=mod["name"],
                   model_gb=mod["total"] / 1e9, budget_gb=budget / 1e9,
                   storage_mb_s=p["storage"] / 1e6, dram_gb_s=p["dram"] / 1e9)
        if budget < mod["pinned"]:
            row.update(fits=False, note=f"budget holds {budget / 2**20:.0f} MiB, the pinned part needs "
                       f"{mod['pinned'] / 2**20:.0f} MiB")
            rows.append(row); continue
        resident_units = min(mod["units"], int((budget - mod["pinned"]) // mod["unit"]))
        share = resident_units / mod["units"]
        keep = 1 - sparsity
        if mod["moe"]:
            h = share if hit is None else hit
            storage = mod["per_token_units"] * mod["unit"] * (1 - h) * keep
        else:
            h = share  # pinned layers are hits every token
            storage = (mod["units"] - resident_units) * mod["unit"] * keep
        touched = mod["shared_touched"] + mod["per_token_units"] * mod["unit"] * keep
        t_s = storage / (p["storage"] * s_eff)
        t_d = touched / (p["dram"] * d_eff)
        row.update(fits=True, resident_share=share, hit_rate=h, storage_mb_per_token=storage / 1e6,
                   dram_mb_per_token=touched / 1e6, tok_s_overlapped=1 / max(t_s, t_d),
                   tok_s_serial=1 / (t_s + t_d))
        rows.append(row)

if as_json == "1":
    for r in rows: print(json.dumps(r))
    sys.exit(0)
print(f"inputs: storage efficiency {s_eff}, DRAM efficiency {d_eff}, sparsity {sparsity}, "
      f"hit rate {'uniform routing (cache share)' if hit is None else hit}, reserve {reserve / 2**20:.0f} MiB")
print("| phone | model | file GB | weight budget GB | resident | hit rate | storage MB/token | DRAM MB/token | tok/s overlapped | tok/s serial |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if not r["fits"]:
        print(f"| {r['phone']} | {r['model']} | {r['model_gb']:.1f} | {r['budget_gb']:.1f} | {r['note']} | | | | | |")
        continue
    print(f"| {r['phone']} | {r['model']} | {r['model_gb']:.1f} | {r['budget_gb']:.1f} | "
          f"{100 * r['resident_share']:.0f} % | {100 * r['hit_rate']:.0f} % | {r['storage_mb_per_token']:.0f} | "
          f"{r['dram_mb_per_token']:.0f} | {r['tok_s_overlapped']:.2f} | {r['tok_s_serial']:.2f} |")
PY
