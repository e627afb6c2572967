// margin's report: each margin note sits level with the words it quotes (below the note above it when they
// would overlap), the filters hide findings by weakness type, and a quote and its note light up together.
(function () {
  "use strict";
  var GAP = 8;

  function notesOf(element) {
    return (element.getAttribute("data-notes") || "").split(" ").filter(Boolean);
  }

  function paragraphOf(note) {
    return note.closest(".para");
  }

  function anchorOf(note) {
    var marks = paragraphOf(note).querySelectorAll("mark.quote");
    for (var i = 0; i < marks.length; i++) {
      if (notesOf(marks[i]).indexOf(note.id) >= 0) {
        return marks[i];
      }
    }
    return null;
  }

  function visible(element) {
    return element.offsetParent !== null;
  }

  // Notes are placed in one column down the page, each level with its quote, or just below the note before it
  // when they would overlap; the text flows on as if the notes were not there. On a narrow page (one column)
  // they stay in the flow, after their paragraph.
  function placeNotes() {
    var root = document.documentElement;
    var notes = Array.prototype.slice.call(document.querySelectorAll(".para > .notes > .note"));
    root.classList.remove("notes-beside");
    notes.forEach(function (note) { note.style.top = ""; });
    var first = document.querySelector(".para");
    if (!first || first.lastElementChild.getBoundingClientRect().left <= first.firstElementChild.getBoundingClientRect().left) {
      return;
    }
    root.classList.add("notes-beside");
    // Every position is read first and every note moved after: reading one after moving another would make
    // the browser lay out the page again for each note.
    var placed = notes.filter(visible).map(function (note) {
      var anchor = anchorOf(note);
      var asideTop = note.parentNode.getBoundingClientRect().top + window.scrollY;
      return {
        note: note,
        asideTop: asideTop,
        wanted: anchor ? anchor.getBoundingClientRect().top + window.scrollY : asideTop,
        height: note.getBoundingClientRect().height
      };
    });
    var last = -Infinity;  // where the last placed note ends, in page coordinates
    placed.forEach(function (item) {
      var top = Math.max(item.wanted, last + GAP);
      item.note.style.top = (top - item.asideTop) + "px";
      last = top + item.height;
    });
    var main = document.querySelector("main");
    var end = main.getBoundingClientRect().bottom + window.scrollY - parseFloat(main.style.paddingBottom || "0");
    main.style.paddingBottom = Math.max(0, last - end) + "px";  // room for notes past the last paragraph
  }

  // A type's checkbox off hides its notes and their numbers, and takes the highlight off words that only
  // notes of hidden types quote.
  function applyFilters() {
    var hidden = {};
    var boxes = document.querySelectorAll(".filters input[data-type]");
    for (var i = 0; i < boxes.length; i++) {
      hidden[boxes[i].getAttribute("data-type")] = !boxes[i].checked;
    }
    var notes = document.querySelectorAll(".note[data-type]");
    for (var j = 0; j < notes.length; j++) {
      notes[j].hidden = hidden[notes[j].getAttribute("data-type")] === true;
    }
    var quoting = document.querySelectorAll("mark.quote, sup.ref");
    for (var k = 0; k < quoting.length; k++) {
      var shown = notesOf(quoting[k]).some(function (id) {
        var note = document.getElementById(id);
        return note !== null && !note.hidden;
      });
      if (quoting[k].tagName === "SUP") {
        quoting[k].hidden = !shown;
      } else {
        quoting[k].classList.toggle("filtered", !shown);
      }
    }
    placeNotes();
  }

  function highlight(ids, on) {
    ids.forEach(function (id) {
      var note = document.getElementById(id);
      if (!note) {
        return;
      }
      note.classList.toggle("active", on);
      var marks = paragraphOf(note).querySelectorAll("mark.quote");
      for (var i = 0; i < marks.length; i++) {
        if (notesOf(marks[i]).indexOf(id) >= 0) {
          marks[i].classList.toggle("active", on);
        }
      }
    });
  }

  function linkQuotesAndNotes() {
    var linked = document.querySelectorAll("mark.quote, sup.ref, .note");
    for (var i = 0; i < linked.length; i++) {
      (function (element) {
        var ids = element.classList.contains("note") ? [element.id] : notesOf(element);
        element.addEventListener("mouseenter", function () { highlight(ids, true); });
        element.addEventListener("mouseleave", function () { highlight(ids, false); });
        if (!element.classList.contains("note")) {
          element.addEventListener("click", function () {
            var note = document.getElementById(ids[0]);
            if (note && window.matchMedia("(max-width: 52rem)").matches) {
              note.scrollIntoView({ block: "nearest" });  // a narrow page: the note is below the paragraph
            }
          });
        }
      })(linked[i]);
    }
  }

  var boxes = document.querySelectorAll(".filters input[data-type]");
  for (var i = 0; i < boxes.length; i++) {
    boxes[i].addEventListener("change", applyFilters);
  }
  linkQuotesAndNotes();
  applyFilters();
  window.addEventListener("resize", placeNotes);
  window.addEventListener("load", placeNotes);
  document.documentElement.setAttribute("data-notes-placed", "yes");
})();
