// Polling for the views: run a refresh now and every few seconds until the view stops it.

export const POLL_MS = 2000;

/** Run `fn` now and then every `ms` until stopped; `now()` runs it again at once. */
export function poller(fn, ms = POLL_MS) {
  let stopped = false;
  let timer = null;
  let running = false;
  let again = false;
  const tick = async () => {
    if (stopped) return;
    running = true;
    try {
      await fn();
    } catch (err) {
      console.error(err);
    } finally {
      running = false;
    }
    if (stopped) return;
    if (again) {
      again = false;
      tick();
    } else {
      timer = setTimeout(tick, ms);
    }
  };
  tick();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
    now() {
      if (stopped) return;
      if (running) {
        again = true;
        return;
      }
      clearTimeout(timer);
      tick();
    },
  };
}
