"""Everything that runs inside a grading job's sandbox, next to submitted code.

This package is staged whole into the jail (grader/isolation/sandbox.py); nothing else of the
grader is. It holds no case builder, no checker and no reference answer: the grader
writes each job's inputs into the job's folder, and judges the raw results the job
writes back.

    __main__   the worker process: set-up, then the job's kind
    common     the job's context and error texts
    guard      the audit hook: what submitted code may not do
    launches   recording the kernels a call launched, and replaying them
    tamper     has the submission rewritten a trusted module?
    traps      library matrix products refused at run time (messages)
    layout     where a GEMM case's operands sit in memory
    gemm, net, mpi   the three parts' jobs
    simcheck   race and index checker for the CUDA simulator
    memcount   memory traffic of simulated kernels (sectors, bank conflicts), via simcheck
"""

CUBLAS = "cublas"  # the module name that selects cuBLAS instead of a submission
# case-N.counts.json: the memory traffic of the graded case counted for the version rule
# (written by gemm.py, read by grader/checks/gemm_structure.py)
COUNTS_SUFFIX = ".counts.json"
