# emu/emu.mk: the kernels on the CPU (issue 22).  Included by the Makefile;
# uses its variables ($(B), $(CC), $(LIBS_A), $(LDLIBS)).  Needs g++ only
# (no nvcc, no GPU).
#
#   make kernels-emu     build build/tailsim-validate-emu, run every kernel's
#                        selftest (--small) on EMU_SEEDS seeds, then the
#                        planted-bug test (emu/planted.sh): fails if a seed
#                        fails or a planted bug passes
#   make check-kernels   the same
#   make emu-quick       selftest --small on one seed (what `make check` runs)
#
# kernels/*.cu(h) are copied to $(B)/emu/kernels/ by emu/rewrite.sh (only the
# launch syntax changes) and compiled as C++17 with emu/include/ first on the
# include path (-fno-strict-aliasing: the kernels pun uint4 and bf16 pointers,
# as nvcc allows); emu/*.cc is the runtime.  validate/*.c are the same objects
# as in build/tailsim-validate.

EMU_CXX   ?= g++
EMU_SEEDS ?= 20
EMU_BASEFLAGS := -std=c++17 -O2 -g -fno-strict-aliasing -Wall -Wextra -Wno-unknown-pragmas \
                 -Wno-unused-parameter -pthread
EMU_CXXFLAGS  := $(EMU_BASEFLAGS) -Iemu/include -I$(B)/emu -I.
EMU_KSRC  := $(wildcard kernels/*.cu) $(wildcard kernels/*.cuh)
EMU_KCOPY := $(EMU_KSRC:%=$(B)/emu/%)
EMU_KOBJ  := $(patsubst %.cu,$(B)/emu/%.o,$(wildcard kernels/*.cu))
EMU_RTOBJ := $(patsubst emu/%.cc,$(B)/emu/rt/%.o,$(wildcard emu/*.cc))
EMU_VALOBJ := $(patsubst %.c,$(B)/%.o,$(wildcard validate/*.c))
EMU_HDR   := $(wildcard emu/include/*.h) emu/emu_impl.h

.PHONY: kernels-emu check-kernels emu-quick

# `make check` runs emu-quick (one seed, ~15 s), except under SANITIZE: the
# sanitizers do not follow the emulator's stack switches
EMU_CHECK_BIN := $(if $(SANITIZE),,$(B)/tailsim-validate-emu)

$(B)/.emuflags: FORCE
	@mkdir -p $(B)
	@echo '$(EMU_CXX) $(EMU_CXXFLAGS)' | cmp -s - $@ || echo '$(EMU_CXX) $(EMU_CXXFLAGS)' > $@

$(EMU_KCOPY): $(B)/emu/kernels/%: kernels/% emu/rewrite.sh
	@mkdir -p $(dir $@)
	@sh emu/rewrite.sh $< $@

# every kernel object depends on every copied header (a handful)
$(B)/emu/kernels/%.o: $(B)/emu/kernels/%.cu $(EMU_KCOPY) $(EMU_HDR) $(B)/.emuflags
	$(EMU_CXX) $(EMU_CXXFLAGS) -x c++ -c $< -o $@

$(B)/emu/rt/%.o: emu/%.cc $(EMU_HDR) $(B)/.emuflags
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_CXXFLAGS) -c $< -o $@

# the emulator's own checks (emu/emu_test.cu)
$(B)/emu/emu_test.cu: emu/emu_test.cu emu/rewrite.sh
	@mkdir -p $(dir $@)
	@sh emu/rewrite.sh $< $@
$(B)/emu/emu-test: $(B)/emu/emu_test.cu $(EMU_KCOPY) $(EMU_HDR) $(EMU_RTOBJ) $(B)/.emuflags
	$(EMU_CXX) $(EMU_CXXFLAGS) -x c++ $< -x none $(EMU_RTOBJ) -o $@

$(B)/tailsim-validate-emu: $(EMU_VALOBJ) $(EMU_KOBJ) $(EMU_RTOBJ) $(LIBS_A)
	$(EMU_CXX) -pthread $(LDSAN) -o $@ $(EMU_VALOBJ) $(EMU_KOBJ) $(EMU_RTOBJ) -Wl,-u,llm_load \
	    $(LIBS_A) $(LDLIBS) -ldl

emu-quick: $(B)/tailsim-validate-emu $(B)/emu/emu-test
	@$(B)/emu/emu-test
	$(B)/tailsim-validate-emu selftest --small --seed 1

kernels-emu: $(B)/tailsim-validate-emu $(B)/emu/emu-test
	@$(B)/emu/emu-test
	@sh emu/seeds.sh $(B)/tailsim-validate-emu $(EMU_SEEDS)
	@EMU_CXX='$(EMU_CXX)' EMU_BASEFLAGS='$(EMU_BASEFLAGS)' B='$(B)' \
	    LINK='$(EMU_VALOBJ) $(EMU_RTOBJ) -Wl,-u,llm_load $(LIBS_A) $(LDLIBS) -ldl' \
	    sh emu/planted.sh

check-kernels: kernels-emu
