"""The autograder: grades submission folders in separate processes and writes reports.

Module map, in the order a submission goes through it (part names: gemm, net, mpi):
  submissions, nbextract, examples   load: folders, notebooks, the bundled bug examples
  cases/       each part's inputs, derived from the run's secret
  isolation/   sandbox, jail, GPU pool, runner: a job confined (integrity: the kit's own)
  worker/      runs inside the sandbox (staged whole; imports nothing else of grader)
  checks/      verdicts from a job's raw files; source rules (policy, anticheat)
  parts/       job -> isolation -> checks -> items: the only place points are given
  reports/     grade book, feedback and class summary (Jinja2 templates), Gradescope
  pipeline, cli   the run wired together; `python -m grader` (__main__, imported by none)
  course/      instructor-only: stubgen, student kit, nbgrader course, sharded grading
  handouts/    beside grading: the handouts rendered to HTML/PDF, their figures and snippets
Shared by all stages: results (item and submission results), scoring (config), safe_io.
"""
