// Command envtest-baseline times controller-runtime's envtest (etcd + kube-apiserver)
// on the same binaries ktest uses, so bench/controlplane_start.py can report a ratio
// measured in the same run. Usage: envtest-baseline -runs 5 (KUBEBUILDER_ASSETS set).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func main() {
	runs := flag.Int("runs", 5, "number of start/stop cycles")
	flag.Parse()
	for i := 0; i < *runs; i++ {
		env := &envtest.Environment{}
		began := time.Now()
		if _, err := env.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "start:", err)
			os.Exit(1)
		}
		ready := time.Since(began)
		began = time.Now()
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
			os.Exit(1)
		}
		fmt.Printf("%.4f %.4f\n", ready.Seconds(), time.Since(began).Seconds())
	}
}
