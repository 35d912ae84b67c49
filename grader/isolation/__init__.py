"""Running a job confined: the sandbox, its jail, the GPU pool, the runner, kit integrity."""
