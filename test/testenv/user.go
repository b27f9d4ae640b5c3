package testenv

// AsUser is a shell command line, for a login pod's shell, that runs cmdline's first command as
// nobody, in /tmp (which every pod has, writable by all, so a job's default output file lands):
// sunk's clusters refuse root's jobs (DisableRootJobs=YES), and root in a login pod is Slurm's
// admin. Slurm commands an admin runs (scontrol update, scancel of anyone's job) stay root's.
// The end-to-end tests and the soak submit their jobs through it.
func AsUser(cmdline string) string { return "cd /tmp && runuser -u nobody -- " + cmdline }
