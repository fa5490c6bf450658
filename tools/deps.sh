#!/bin/sh
# Dependency step for `make run` and `make check`: checks for the Debian
# packages tailsim builds and tests with.  When something is missing and we
# run as root on Debian, installs it with apt-get; otherwise prints the one
# apt-get line to run and fails.
set -u
missing=""
need_pc() { pkg-config --exists "$1" 2>/dev/null || missing="$missing $2"; }
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
need_pc gsl libgsl-dev
need_pc sqlite3 libsqlite3-dev
need_pc criterion libcriterion-dev
need_pc inih libinih-dev
need_pc jansson libjansson-dev
command -v gnuplot >/dev/null 2>&1 || missing="$missing gnuplot-nox"
command -v cc >/dev/null 2>&1 || missing="$missing gcc"
# g++: the CPU emulator of the kernels (emu/, make kernels-emu, run by make check)
command -v g++ >/dev/null 2>&1 || missing="$missing g++"
# OpenMPI: `make check` builds build/tailsim-mpi and runs the sweep under
# `mpirun -np 2`; `make MPI=1` makes build/tailsim that binary.  The library
# and the default binary do not link it (set TAILSIM_NO_MPI=1 to skip it here;
# the MPI tests then skip themselves).
[ "${TAILSIM_NO_MPI:-}" = 1 ] || command -v mpicc >/dev/null 2>&1 || missing="$missing openmpi-bin libopenmpi-dev"
[ -z "$missing" ] && exit 0

line="apt-get install -y$missing"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "tailsim: installing missing packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq$missing >/dev/null || {
        echo "tailsim: apt-get failed; run: $line" >&2; exit 1; }
    exit 0
fi
echo "tailsim: missing packages:$missing" >&2
echo "run as root: $line" >&2
exit 1
