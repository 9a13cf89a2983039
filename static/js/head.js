// Loaded in <head> without defer, so styles for pages with JS apply before the first paint.
document.documentElement.classList.add("js");
