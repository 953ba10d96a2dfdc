"""Running an agent: the `Runner`, the run stream that saves as it goes, sessions and time
travel."""
