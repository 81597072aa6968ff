  // Show script errors on the page itself: a broken report should say so.
  window.__errors = [];
  window.addEventListener("error", function (e) {
    window.__errors.push(String(e.message));
    var box = document.getElementById("js-errors");
    if (box) { box.hidden = false; box.textContent = "Script error: " + window.__errors.join("; "); }
  });
