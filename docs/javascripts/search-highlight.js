/* Search results that highlight what you searched for, on every result.
 *
 * With search.highlight, Material links each result as page/?h=term so the page marks the term.
 * A page's own result (not one of its sections) gets an empty ?h= when the term occurs only in the
 * page's sections, and then nothing is marked. Here such links get the query typed into the search
 * box, split into words as the search splits them.
 */
(function () {
  "use strict";

  function words(query) {
    return query.toLowerCase().split(/[^\p{L}\p{N}_]+/u).filter(Boolean).join(" ");
  }

  function fill(list) {
    var input = document.querySelector("input.md-search__input");
    var query = input ? words(input.value) : "";
    if (!query) return;
    list.querySelectorAll('a[href*="?h="]').forEach(function (link) {
      var url = new URL(link.getAttribute("href"), location.href);
      if (url.searchParams.get("h")) return;
      url.searchParams.set("h", query);
      link.setAttribute("href", url.href);
    });
  }

  function watch() {
    var list = document.querySelector(".md-search-result__list");
    if (!list) return;
    fill(list);
    new MutationObserver(function () { fill(list); }).observe(list, { childList: true, subtree: true });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", watch);
  } else {
    watch();
  }
})();
