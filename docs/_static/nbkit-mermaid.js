// Draw every <pre class="mermaid"> block of the page with the Mermaid bundle the site serves itself
// (docs/_ext/nbkit_docs/mermaid.py). Runs once the page has loaded; the theme follows the site's
// light/dark mode. A block that fails to parse keeps its text and gets the class "nbkit-diagram-error".
(function () {
  "use strict";
  function draw() {
    if (typeof window.mermaid === "undefined") {
      return;
    }
    var dark = document.documentElement.dataset.theme === "dark";
    window.mermaid.initialize({ startOnLoad: false, theme: dark ? "dark" : "default", securityLevel: "strict" });
    var blocks = document.querySelectorAll("pre.mermaid");
    window.mermaid.run({ nodes: blocks, suppressErrors: true }).then(function () {
      blocks.forEach(function (block) {
        if (!block.querySelector("svg")) {
          block.classList.add("nbkit-diagram-error");
        }
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
