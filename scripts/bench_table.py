#!/usr/bin/env python3
"""One line per benchmark from a file of JSON lines: what ran, prompt speed, step time and the step's
share of the copy bandwidth. A line is `duet bench` or bench/peer_transformers.py output, or
{"variant": name, "result": that output} (scripts/bench_variants.sh). Lines that are not JSON are skipped.

    scripts/bench_table.py FILE
"""
import json
import sys


def main():
    print(f"{'what':40} {'arch':10} {'weights':12} {'prefill/s':>10} {'step ms':>8} {'of copy':>7}")
    for line in open(sys.argv[1]):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        r = record.get("result", record)
        what = record.get("variant", str(r.get("backend", "?")))
        prefill = r.get("prefill_tokens_per_s", r.get("prefill_rows_per_s", 0))
        step = r.get("decode_ms_per_token", r.get("ms_per_frame", 0))
        share = r.get("decode_fraction_of_copy", 0)
        print(f"{what[:40]:40} {r.get('arch', '?'):10} {r.get('weights', '?'):12} {prefill:10.0f} {step:8.3f} "
              f"{share:7.3f}")


if __name__ == "__main__":
    main()
