# tailsim: one Makefile.  Objects under build/, -MMD -MP dependency files, a
# flags stamp so that changing flags rebuilds, CUDA parts only when nvcc is found.
#
#   make            build build/tailsim (and build/tailsim-validate with nvcc)
#   make run        check dependencies, build, run the main job into reports/out
#   make check      check dependencies and the include rules, build, run every test
#                   suite and the commands the docs show (make docs-check alone)
#   make bench      simulator speed benchmarks
#   make fuzz       run every libFuzzer target for FUZZ_SECONDS (clang)
#   make memcheck   every test suite under valgrind (no leak, no invalid access)
#   make SANITIZE=address,undefined check
#   make install PREFIX=/usr/local DESTDIR=...
#   make MPI=1      build/tailsim on OpenMPI (mpicc): mpirun -np N build/tailsim sweep
#                   (`make check` also builds build/tailsim-mpi when mpicc is found)

CC      ?= cc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
OPT     ?= -O2
CFLAGS  ?=
PKGS    := gsl sqlite3 inih jansson
B       := build

BASE_CFLAGS := -std=c11 -Wall -Wextra -g $(OPT) -I. -D_POSIX_C_SOURCE=200809L
ifneq ($(SANITIZE),)
BASE_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
LDSAN       := -fsanitize=$(SANITIZE)
endif
ALL_CFLAGS := $(BASE_CFLAGS) $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(CFLAGS)
LDLIBS     := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lgsl -lgslcblas -lsqlite3 -linih -ljansson) -lm
TEST_LIBS  := $(shell pkg-config --libs criterion 2>/dev/null || echo -lcriterion)

# the simulator library (no CLI, no MPI) and the CLI's library (every command
# but main.c, so that the tests can call the commands directly)
LIB_SRC  := $(wildcard common/*.c traces/*.c models/*.c results/*.c reports/*.c kernels/ref/*.c \
                       sim/*.c sim/policy/*.c sim/dcp/*.c) \
            $(filter-out sweep/sweep_mpi.c,$(wildcard sweep/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(B)/%.o)
CLI_SRC  := $(filter-out cli/main.c,$(wildcard cli/*.c))
CLI_OBJ  := $(CLI_SRC:%.c=$(B)/%.o)
LIBS_A   := $(B)/libtailsim-cli.a $(B)/libtailsim.a
MAIN_OBJ := $(B)/cli/main.o
TESTS    := $(patsubst tests/%.c,$(B)/tests/%,$(wildcard tests/test_*.c))
BENCHES  := $(patsubst bench/%.c,$(B)/bench/%,$(wildcard bench/*.c))

.DELETE_ON_ERROR:
.PHONY: all deps run check bench clean install validate fuzz memcheck FORCE

all: $(B)/tailsim validate

# --- flags stamp: rebuild everything when the compiler or flags change ------
$(B)/.flags: FORCE
	@mkdir -p $(B)
	@echo '$(CC) $(ALL_CFLAGS) $(LDSAN)' | cmp -s - $@ || echo '$(CC) $(ALL_CFLAGS) $(LDSAN)' > $@

$(B)/%.o: %.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(B)/libtailsim.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/libtailsim-cli.a: $(CLI_OBJ)
	@rm -f $@
	ar rcs $@ $^

# --- MPI: cli/main.c with -DTS_MPI and the MPI transport, built by mpicc ----
# build/tailsim-mpi is built whenever mpicc exists; MPI=1 makes build/tailsim
# that binary.  The library is the same either way (no MPI in it).
MPICC     ?= $(shell command -v mpicc 2>/dev/null)
MPI_OBJ   := $(B)/mpi/cli/main.o $(B)/mpi/sweep/sweep_mpi.o
MPI_BIN   := $(if $(MPICC),$(B)/tailsim-mpi)
$(B)/mpi/%.o: %.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(MPICC) $(ALL_CFLAGS) -DTS_MPI -MMD -MP -c $< -o $@
$(B)/tailsim-mpi: $(MPI_OBJ) $(LIBS_A)
	$(MPICC) $(LDSAN) -o $@ $^ $(LDLIBS)

# the MPI stamp: switching MPI=1 on or off relinks build/tailsim
$(B)/.mpi: FORCE
	@mkdir -p $(B)
	@echo '$(MPI)' | cmp -s - $@ || echo '$(MPI)' > $@

ifeq ($(MPI),1)
ifeq ($(MPICC),)
$(error MPI=1 needs mpicc: apt-get install -y openmpi-bin libopenmpi-dev)
endif
$(B)/tailsim: $(MPI_OBJ) $(LIBS_A) $(B)/.mpi
	$(MPICC) $(LDSAN) -o $@ $(MPI_OBJ) $(LIBS_A) $(LDLIBS)
else
$(B)/tailsim: $(MAIN_OBJ) $(LIBS_A) $(B)/.mpi
	$(CC) $(LDSAN) -o $@ $(MAIN_OBJ) $(LIBS_A) $(LDLIBS)
endif

$(B)/tests/%: tests/%.c $(LIBS_A) $(B)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP $< -o $@ $(LIBS_A) $(LDSAN) $(TEST_LIBS) $(LDLIBS)

# analysis tools (not part of tailsim): build/tools/vidur-bound
$(B)/tools/vidur-bound: tools/vidur_bound.c $(LIBS_A) $(B)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP $< -o $@ $(LIBS_A) $(LDSAN) $(LDLIBS)

$(B)/bench/%: bench/%.c $(LIBS_A) $(B)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP $< -o $@ $(LIBS_A) $(LDSAN) $(LDLIBS)

# --- CUDA validation program (only with nvcc) ------------------------------
ifneq ($(NVCC),)
-include validate/validate.mk
else
validate:
	@echo "nvcc not found: skipping the CUDA validation program"
endif

# --- the kernels on the CPU (g++ only): make kernels-emu --------------------
include emu/emu.mk

# --- the two quick-start commands -------------------------------------------
deps:
	@sh tools/deps.sh

run: deps
	@$(MAKE) --no-print-directory $(B)/tailsim
	sh tools/run-main.sh

check: deps
	@sh tools/check-includes.sh --self-test && sh tools/check-includes.sh
	@$(MAKE) --no-print-directory $(B)/tailsim $(MPI_BIN) $(TESTS) validate $(EMU_CHECK_BIN) \
	    $(B)/tools/vidur-bound
	@sh tools/run-tests.sh $(TESTS)
	@$(B)/tools/vidur-bound --self-test
	@bash tools/docs-check.sh
	@$(if $(EMU_CHECK_BIN),$(MAKE) --no-print-directory emu-quick,echo "check: emulated selftest skipped under SANITIZE (fibers)")

bench: deps
	@$(MAKE) --no-print-directory OPT=-O2 $(B)/tailsim $(BENCHES)
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done

# --- valgrind over the test binaries: make memcheck --------------------------
# Leaks of any kind "definitely lost", invalid reads/writes and uses of
# uninitialised values fail the run.  The suites that only drive the CLI in
# child processes (bad inputs, scale, determinism, validate, the paper report,
# sweeps, the gnuplot and MPI safety cases) are left out: their work happens in
# build/tailsim, which the other suites cover (test_sweep also starts mpirun).
MEMCHECK_SKIP := test_badinput test_scale test_determinism test_validate test_paper test_sweep \
                 test_safety_gp test_safety_mpi
MEMCHECK := $(filter-out $(MEMCHECK_SKIP:%=$(B)/tests/%),$(TESTS))
memcheck: deps
	@$(MAKE) --no-print-directory $(B)/tailsim $(MEMCHECK)
	@for t in $(MEMCHECK); do echo "== valgrind $$t"; \
	    TAILSIM_SHARED=$${TAILSIM_SHARED:-../shared} valgrind -q --trace-children=yes --trace-children-skip="*gnuplot*" --leak-check=full \
	        --errors-for-leak-kinds=definite --error-exitcode=99 $$t --jobs=1 >$(B)/memcheck.log 2>&1 \
	        || { cat $(B)/memcheck.log; echo "memcheck FAILED: $$t"; exit 1; }; \
	    tail -n 1 $(B)/memcheck.log; done

# --- fuzzing (clang's libFuzzer): make fuzz [FUZZ_SECONDS=60] -------------
# Each target in tests/fuzz/targets.h is built with the whole library under
# -fsanitize=fuzzer,address,undefined and run for FUZZ_SECONDS from its seed
# corpus in tests/fuzz/corpus/<target>/; a crash is written there as
# crash-<hash> and then replays in `make check` (tests/test_fuzz.c).
FUZZ_TARGETS := trace scenario vidur batch calib grid dcpplan
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_SRC     := $(filter-out kernels/ref/%,$(LIB_SRC))
$(B)/fuzz/fuzz_%: tests/fuzz/driver.c tests/fuzz/targets.h $(FUZZ_SRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -g -O1 -I. -D_POSIX_C_SOURCE=200809L -DFUZZ_TARGET=fuzz_$* \
	    -fsanitize=fuzzer,address,undefined $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
	    tests/fuzz/driver.c $(FUZZ_SRC) -o $@ $(LDLIBS)
fuzz: deps $(FUZZ_TARGETS:%=$(B)/fuzz/fuzz_%)
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(B)/fuzz/work-$$t && \
	    echo "== fuzz $$t for $(FUZZ_SECONDS) s" && \
	    $(B)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
	        -artifact_prefix=tests/fuzz/corpus/$$t/ $(B)/fuzz/work-$$t tests/fuzz/corpus/$$t \
	        2>&1 | tail -n 3 || exit 1; \
	done

# PREFIX/bin/tailsim and its data in PREFIX/share/tailsim (the INIs, the
# gnuplot scripts, a calibration when one was measured): the binary finds
# that directory from its own path (common/util.c, ts_data_root()), so it
# runs from anywhere, also when DESTDIR stages it elsewhere.
PREFIX ?= /usr/local
SHARE   = $(DESTDIR)$(PREFIX)/share/tailsim
install: $(B)/tailsim
	install -d $(DESTDIR)$(PREFIX)/bin $(SHARE)/models/hw $(SHARE)/models/llm \
	    $(SHARE)/scenarios/grids $(SHARE)/reports
	install -m 755 $(B)/tailsim $(DESTDIR)$(PREFIX)/bin/tailsim
	install -m 644 models/hw/*.ini $(SHARE)/models/hw/
	install -m 644 models/llm/*.ini $(SHARE)/models/llm/
	install -m 644 scenarios/*.ini $(SHARE)/scenarios/
	install -m 644 scenarios/grids/*.ini $(SHARE)/scenarios/grids/
	install -m 644 reports/*.gp $(SHARE)/reports/
	if [ -d models/calib ]; then install -d $(SHARE)/models/calib && \
	    install -m 644 models/calib/*.csv $(SHARE)/models/calib/; fi

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)

# Run the tailsim commands that README.md and docs/*.md show (tools/docs-check.sh).
.PHONY: docs-check
docs-check: $(B)/tailsim
	bash tools/docs-check.sh
