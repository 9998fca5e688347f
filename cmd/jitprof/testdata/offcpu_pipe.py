# Prints its own truth: the time reader() spent in os.read on a pipe. A
# child process answers each request on it after 7 ms (a process: a
# thread would wait for the GIL, which the reader holds); between
# requests work() spins 13 ms.
import os
import time

serve, requests = os.pipe()
answers, answer = os.pipe()


def server():
    while os.read(serve, 1):
        time.sleep(0.007)
        os.write(answer, b"x")


def work(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def reader():
    t0 = time.perf_counter()
    os.read(answers, 1)
    return time.perf_counter() - t0


if os.fork() == 0:
    os.close(requests)
    os.close(answers)
    server()
    os._exit(0)
os.close(serve)
os.close(answer)
blocked = 0.0
end = time.monotonic() + 3
while time.monotonic() < end:
    work(0.013)
    os.write(requests, b"?")
    blocked += reader()
os.close(requests)
os.wait()
print(f"truth reader {blocked}")
