// Package deploy holds no code: it is the deployment kit's home, and its
// tests check the kit against the memfs it deploys.
//
//	systemd/memfs-serve.service   memfs serve under systemd, fully sandboxed
//	systemd/memfs-worker.service  memfs worker: root, FUSE, mounts visible to the host
//	systemd/mnt-memory-prefs.mount one store mounted through mount.memfs
//	systemd/fstab.example         the same as one /etc/fstab line
//	container/Dockerfile          a static memfs in a minimal image (non-root)
//	container/compose.yaml        serve, a worker, and a sandbox sharing /mnt/memory
//
// The tests parse those files and assert what matters for running memfs
// (stop timeouts, kill mode, FUSE access for the worker, mount
// propagation, no key in any file), check that every memfs flag and
// MEMFS_ variable they use exists in the built binary's help, and run
// systemd-analyze verify on the units where it is installed (CI installs
// it: test/run-tests.sh).
package deploy
