// Package podprocess plays a kubelet's part for one container of a
// Deployment on a local cluster, whose pods are kwok's and run nothing: it
// runs a binary as a child process of the test for as long as a pod of the
// Deployment is Ready, as the pod's container would run.
//
//	r, err := podprocess.Start(ctx, podprocess.Options{
//		Config: cfg, Namespace: "capi-system", Selector: sel,
//		Finalizer: "example.test/process", Command: cmd, LogPath: log,
//	})
//	defer r.Stop()
//	r.WaitRunning(ctx, true)
//
// The life cycle is a kubelet's, to the extent tests can see it:
//
//   - A process starts when a pod selected by Options.Selector is Ready and
//     not terminating. The pod is first held with Options.Finalizer: kwok
//     deletes a terminating pod at once, a kubelet keeps it until its
//     containers have exited, and a move that waits for the pods to be gone
//     must find the process gone too.
//   - When that pod starts terminating (a scale to zero, a rollout) or
//     disappears, the process gets SIGTERM, and SIGKILL once the pod's
//     terminationGracePeriodSeconds have passed; only then is the finalizer
//     removed.
//   - A process that exits on its own is started again for the same pod
//     while it stays Ready, after a back-off that doubles from 1s to 20s
//     (a kubelet's CrashLoopBackOff, shortened for tests) and is reset by
//     a run that lasted 10s.
//
// Options.Command builds each run's command line and environment from the
// pod, as a kubelet resolves a container's fieldRef variables and mounts a
// token bound to the pod; Options.Started and Options.Stopping let the
// caller follow the process (to open and close what stands for its
// Service's endpoints).
//
// Every process runs in its own process group and gets SIGKILL if the test
// process dies (Pdeathsig), so nothing outlives the test binary. Output of
// every run is appended to Options.LogPath.
//
// The package never creates, scales or deletes a Deployment or a pod; the
// only write it makes is its finalizer on the pod a process runs for.
package podprocess
