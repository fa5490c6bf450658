# validate/validate.mk: the CUDA validation program, build/tailsim-validate.
# Included by the Makefile only when nvcc is found; uses its variables
# ($(B), $(CC), $(ALL_CFLAGS), $(LDLIBS), $(NVCC), $(LDSAN)).
#
#   make validate                    build/tailsim-validate (needs no GPU)
#   make validate-portable           the same with the third-party libraries and
#                                    cudart linked statically, for machines that
#                                    have a driver but no -dev packages
#   make NVCCFLAGS='-O3 -lineinfo' validate
#
# validate/*.c are plain C11 built by the Makefile's own %.o rule; the kernels
# (kernels/*.cu) go through nvcc into $(B)/kernels/, with -MMD -MP dependency
# files and their own flags stamp ($(B)/.nvflags).  sm_90 machine code plus
# compute_90 PTX, so that a newer GPU can still JIT the kernels.
#
# llm_load() is referenced weakly by validate/calibrate.c (built-in Qwen2.5
# shapes stand in while models/ lacks it); -u llm_load makes the linker pull
# it from libtailsim.a whenever the archive defines it.

CUDA_HOME   ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_LIBDIR ?= $(CUDA_HOME)/lib64
NVCCFLAGS   ?= -O3
NVCC_ALL    := -std=c++17 -I. $(NVCCFLAGS) \
               -gencode=arch=compute_90,code=sm_90 \
               -gencode=arch=compute_90,code=compute_90 \
               -Xcompiler -Wall,-Wextra

CU_SRC  := $(wildcard kernels/*.cu)
CU_OBJ  := $(CU_SRC:%.cu=$(B)/%.o)
VAL_SRC := $(wildcard validate/*.c)
VAL_OBJ := $(VAL_SRC:%.c=$(B)/%.o)

VAL_LINK := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublasLt -lcudart -lstdc++ -ldl
VAL_PORTABLE_LINK := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublasLt \
               -Wl,-Bstatic -lcudart_static -lgsl -lgslcblas -lsqlite3 -linih -ljansson \
               -Wl,-Bdynamic -lstdc++ -lpthread -lrt -ldl -lm

.PHONY: validate validate-portable

validate: $(B)/tailsim-validate
	@echo "validate: built $(B)/tailsim-validate with $(NVCC)"

validate-portable: $(B)/tailsim-validate-portable

$(B)/.nvflags: FORCE
	@mkdir -p $(B)
	@echo '$(NVCC) $(NVCC_ALL)' | cmp -s - $@ || echo '$(NVCC) $(NVCC_ALL)' > $@

$(B)/kernels/%.o: kernels/%.cu $(B)/.nvflags
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_ALL) -MMD -MP -c $< -o $@

$(B)/tailsim-validate: $(VAL_OBJ) $(CU_OBJ) $(LIBS_A)
	$(CC) $(LDSAN) -o $@ $(VAL_OBJ) $(CU_OBJ) -Wl,-u,llm_load $(LIBS_A) \
		$(VAL_LINK) $(LDLIBS)

$(B)/tailsim-validate-portable: $(VAL_OBJ) $(CU_OBJ) $(LIBS_A)
	$(CC) -o $@ $(VAL_OBJ) $(CU_OBJ) -Wl,-u,llm_load $(LIBS_A) \
		$(VAL_PORTABLE_LINK)
