#!/usr/bin/env bash
# One line naming this machine for benchmark output: CPU model, family and model numbers, CPUs,
# L2 and L3 (from lscpu), e.g. "AMD EPYC (family 26 model 2), 2 CPUs, L2 2 MiB (2 instances),
# L3 32 MiB (1 instance)". Every bench script prints it, so a figure always says where it ran.
set -euo pipefail
LC_ALL=C lscpu | awk -F: '
  { gsub(/^[ \t]+/, "", $2) }
  $1 == "Model name" { model = $2 } $1 == "CPU family" { family = $2 } $1 == "Model" { m = $2 }
  $1 == "CPU(s)" { cpus = $2 } $1 == "L2 cache" { l2 = $2 } $1 == "L3 cache" { l3 = $2 }
  END {
    printf "%s (family %s model %s), %s CPUs, L2 %s, L3 %s\n",
      model ? model : "unknown CPU", family ? family : "?", m ? m : "?", cpus ? cpus : "?",
      l2 ? l2 : "?", l3 ? l3 : "?"
  }'
