// Command pingpong switches threads off and onto their CPUs as fast as two
// threads passing a byte back and forth over pipes can, beside idle threads
// blocked from their start to the program's end, for the agent's off-CPU
// tests and overhead figures. It prints its truth as JSON: the round trips
// a second, and the idle threads' ids.
//
//	pingpong -idle 50 -rate 25000 -for 30s
package main

import (
	"encoding/json"
	"flag"
	"os"
	"runtime"
	"syscall"
	"time"
)

func main() {
	idle := flag.Int("idle", 0, "threads blocked until the end")
	span := flag.Duration("for", 10*time.Second, "how long to play")
	rate := flag.Int("rate", 0, "round trips a second at most (each blocks both threads once); 0: as many as can be")
	flag.Parse()

	quit := make(chan struct{})
	tids := make(chan int)
	for range *idle {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with its goroutine
			tids <- syscall.Gettid()
			<-quit
		}()
	}
	var idleTids []int
	for range *idle {
		idleTids = append(idleTids, <-tids)
	}

	var ping, pong [2]int
	if err := syscall.Pipe(ping[:]); err != nil {
		panic(err)
	}
	if err := syscall.Pipe(pong[:]); err != nil {
		panic(err)
	}
	go func() {
		runtime.LockOSThread()
		b := make([]byte, 1)
		for {
			if n, _ := syscall.Read(ping[0], b); n != 1 {
				return
			}
			syscall.Write(pong[1], b)
		}
	}()
	runtime.LockOSThread()
	b := make([]byte, 1)
	start := time.Now()
	rounds := 0
	for time.Since(start) < *span {
		for range 1000 {
			syscall.Write(ping[1], b)
			syscall.Read(pong[0], b)
		}
		rounds += 1000
		if *rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(rounds) * time.Second / time.Duration(*rate))))
		}
	}
	elapsed := time.Since(start)
	close(quit)
	json.NewEncoder(os.Stdout).Encode(struct {
		RoundsPerSecond float64 `json:"rounds_per_second"`
		Idle            []int   `json:"idle"`
	}{float64(rounds) / elapsed.Seconds(), idleTids})
}
