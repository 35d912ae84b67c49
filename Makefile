# Neural networks on CUDA and MPI: course kit. `make help` lists the targets.
#
# Every target bootstraps .venv from pyproject.toml on first use. On a machine that already
# has the packages but no registry (a GPU node, say), use an existing interpreter instead:
#     make grade PY=python3

VENV ?= .venv
PY ?= $(VENV)/bin/python
# Where nvidia-smi exists, the venv also gets CuPy so that kernels run on the GPU; nbgrader
# is there so that the tests exercise the notebook round trip.
EXTRAS ?= dev,nbgrader$(shell command -v nvidia-smi >/dev/null 2>&1 && echo ,gpu)
ifeq ($(PY),$(VENV)/bin/python)
SETUP := $(VENV)/.installed
endif

SUBMISSIONS ?=
OUT ?= grades
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
# Test processes (pytest-xdist): one per core, at most 4, since many tests grade with two
# jobs of their own. A test file stays on one process (its fixtures grade once).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)
PARALLEL = $$($(PY) -c 'import xdist' 2>/dev/null && echo "-n $(TEST_WORKERS) --dist loadfile")
COURSE ?= build/course

.PHONY: help grade check test test-all lint starter data train bench-gemm bench-train clean distclean
.PHONY: train-mpi bench-mpi bench tune handouts figures
.PHONY: dist-student release sample-class autograde

help:
	@echo "make grade       grade the bundled example submissions (or SUBMISSIONS='dir ...')"
	@echo "make check       grade your own starter/ and show every check"
	@echo "                 (PART=gemm KERNEL=naive, PART=net, FUNCTION=scatter_batch: only those)"
	@echo "make test        the kit's test suite less its slow tests (GPU tests run where a GPU is)"
	@echo "make test-all    every test, the slow ones too (MARK=gemm|net|mpi: one part's)"
	@echo "make data        fetch MNIST (MNIST_SRC=<folder or URL> to use a local copy)"
	@echo "make train       train the network (IMPL=reference|solution|starter|dir, ARGS=...)"
	@echo "make bench-gemm  GEMM kernels against cuBLAS, their resources, a plot (GPU; ARGS=--sweep-v4)"
	@echo "make bench-train seconds per epoch against PyTorch (GPU)"
	@echo "make train-mpi   train across NP=2 MPI ranks (IMPL=..., ARGS=...)"
	@echo "make bench-mpi   MPI scaling over 1, 2, 4 ranks: table and plot (ARGS=...; on GPUs"
	@echo "                 the device-resident engine, one GPU per rank, NCCL)"
	@echo "make bench       the paper's comparison and leapfrogging (ARGS=--quick: minutes)"
	@echo "make tune        the paper's learning-rate grid on a 5:1 split (ARGS=--quick)"
	@echo "make starter     regenerate starter/ from solution/"
	@echo "make handouts    the handouts as HTML (PDF too where Chromium is) in build/handouts/,"
	@echo "                 links checked, Python snippets run, formulas checked against the code"
	@echo "make figures     redraw the handouts' diagrams into handouts/img/"
	@echo "make dist-student  what students receive: build/dist/nnkit-student(.tar.gz)"
	@echo "make release     nbgrader course in COURSE=build/course, assignments generated"
	@echo "make sample-class  three sample submissions into COURSE/submitted/"
	@echo "make autograde   the kit grades COURSE/submitted (test cells too) -> COURSE/gradebook.csv"
	@echo "make clean       remove build outputs (never the nbgrader course or grades)"
	@echo "make distclean   also remove build/, COURSE (nbgrader submissions, gradebook.db), grades/, results/"
	@echo "Options: PY=python3 (use an existing interpreter), OUT=grades, SUBMISSIONS=..."

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

grade: $(SETUP)
	$(PY) -m grader --out $(OUT) --jobs $(JOBS) -- $(SUBMISSIONS)

# PART=gemm|net|mpi, KERNEL=naive|shared|register, FUNCTION=<a Part 2 or 3 function>: only
# those checks, into a folder of their own (grader/student.py), as in the student kit.
PART ?=
KERNEL ?=
FUNCTION ?=
CHECK_NAME := $(subst $(eval) ,-,$(strip $(PART) $(KERNEL) $(FUNCTION)))
check: $(SETUP)
	$(PY) -m grader.student starter --out build/check$(if $(CHECK_NAME),/$(CHECK_NAME)) \
	    --details --jobs $(JOBS) $(if $(PART),--parts $(PART)) \
	    $(if $(KERNEL),--kernels $(KERNEL)) $(if $(FUNCTION),--function $(FUNCTION))

# `make test` leaves out tests marked slow (full sweeps, kept in reduced form here);
# `make test-all` runs everything, MARK= narrows it to one part's tests.
test: $(SETUP)
	$(PY) -m pytest -q -m "not slow" $(PARALLEL)
	$(PY) -m ruff check .

test-all: $(SETUP)
	$(PY) -m pytest -q $(if $(MARK),-m "$(MARK)") $(PARALLEL)
	$(PY) -m ruff check .

lint: $(SETUP)
	$(PY) -m ruff check .

starter: $(SETUP)
	$(PY) -m grader.course.stubgen

# A broken link between handouts, or to an image, fails the build; then the handouts'
# Python snippets run and their formulas are checked against nnkit/network.py.
handouts: $(SETUP)
	$(PY) -m grader.handouts --out build/handouts --pdf auto
	$(PY) -m pytest -q tests/course/test_handout_snippets.py tests/course/test_handout_equations.py

figures: $(SETUP)
	$(PY) -m grader.handouts.figures --out handouts/img

dist-student: $(SETUP)
	$(PY) -m grader.course.dist --out build/dist

# release also writes COURSE/kit_manifest.json, what autograde checks the kit against.
release: $(SETUP)
	$(PY) -m grader.course.nbcourse release --course $(COURSE)

sample-class: $(SETUP)
	$(PY) -m grader.course.nbcourse sample-class --course $(COURSE)

# Refused if the kit differs from the release's manifest or from git HEAD (ALLOW_UNCOMMITTED=1:
# the manifest only, for a kit in development). Bytecode is compiled afresh into a private
# folder, so that no .pyc left in the kit's __pycache__ folders stands in for a checked file.
ALLOW_UNCOMMITTED ?=
autograde: $(SETUP)
	@prefix=$$(mktemp -d) && status=0 && \
	PYTHONPYCACHEPREFIX=$$prefix $(PY) -m grader.course.nbcourse autograde --course $(COURSE) \
	    --jobs $(JOBS) $(if $(ALLOW_UNCOMMITTED),--allow-uncommitted) || status=$$?; \
	rm -rf "$$prefix"; exit $$status

data: $(SETUP)
	$(PY) -m nnkit data

IMPL ?= reference
ARGS ?=
train: $(SETUP)
	$(PY) -m nnkit train --impl $(IMPL) $(ARGS)

bench-gemm: $(SETUP)
	$(PY) -m nnkit bench-gemm --json results/bench_gemm.json --plot results/bench_gemm.png $(ARGS)

bench-train: $(SETUP)
	$(PY) -m nnkit bench-train --json results/bench_train.json

# `nnkit mpirun` starts the job with the mpiexec of the interpreter's environment (the
# MPICH wheel), else the PATH's (a site MPI), adding the flags Open MPI needs (as root, or
# with more ranks than cores). MPIEXEC=path chooses another launcher.
MPIEXEC ?=
NP ?= 2
train-mpi: $(SETUP)
	@case "$(NP)" in ''|*[!0-9]*|0) echo "make train-mpi: NP must be a number of ranks, 1 or more (got '$(NP)')" >&2; exit 2;; esac
	$(PY) -m nnkit mpirun -n $(NP) $(if $(MPIEXEC),--mpiexec $(MPIEXEC)) -- \
	    $(PY) -m nnkit train --mpi --impl $(IMPL) $(ARGS)

# Where nvidia-smi exists, the device-resident engine (one GPU per rank, NCCL) at the two
# configurations of the Part 3 handout; elsewhere, or with MPI_GPU=0, CPU ranks.
MPI_GPU ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo 1 || echo 0)
RESIDENT = $(PY) -m nnkit bench-mpi --modes resident --device gpu --epochs 3
bench-mpi: $(SETUP)
ifeq ($(MPI_GPU),1)
	$(RESIDENT) --hidden 4096 --batch 6400 --json results/bench_mpi_gpu_4096.json \
		--plot results/bench_mpi_gpu_4096.png $(ARGS)
	$(RESIDENT) --hidden 1024 --batch 800 --json results/bench_mpi_gpu_1024.json \
		--plot results/bench_mpi_gpu_1024.png $(ARGS)
else
	$(PY) -m nnkit bench-mpi --json results/bench_mpi.json --plot results/bench_mpi.png $(ARGS)
endif

# The paper's comparison (handouts/part4-paper.md): tables and plots in results/paper/.
bench: $(SETUP)
	$(PY) -m nnkit bench --out results/paper $(ARGS)

tune: $(SETUP)
	$(PY) -m nnkit tune --out results/paper $(ARGS)

# Build outputs only: the nbgrader course (build/course: submissions, gradebook.db) and
# the grades stay; `make distclean` removes them too.
clean:
	rm -rf build/examples build/bugs build/notebooks build/dist build/check build/handouts \
	    .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -not -path './.venv/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf build $(COURSE) grades results
