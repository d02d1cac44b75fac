//go:build unix

package budget

import "syscall"

// processAlive reports whether process pid exists on this machine.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
