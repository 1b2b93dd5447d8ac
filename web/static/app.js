// redrive operator UI: small enhancements over pages that work without scripts.
(function () {
  'use strict';

  // Show each time in the browser's time zone as a tooltip; the text stays in UTC.
  document.querySelectorAll('time[datetime]').forEach(function (t) {
    var d = new Date(t.dateTime);
    if (!isNaN(d.getTime())) { t.title = d.toLocaleString(); }
  });

  // Failure list: row selection for the bulk actions.
  var bulk = document.getElementById('bulk');
  if (bulk) {
    var all = document.getElementById('select-all');
    var rows = Array.prototype.slice.call(bulk.querySelectorAll('input.row-select'));
    var count = document.getElementById('selected-count');
    var scopeAll = document.getElementById('scope-all');
    var buttons = [document.getElementById('bulk-retry'), document.getElementById('bulk-close')];
    var update = function () {
      var n = rows.filter(function (r) { return r.checked; }).length;
      if (count) { count.textContent = String(n); }
      if (all) {
        all.checked = n > 0 && n === rows.length;
        all.indeterminate = n > 0 && n < rows.length;
      }
      var ok = n > 0 || (scopeAll && scopeAll.checked);
      buttons.forEach(function (b) { if (b) { b.disabled = !ok; } });
    };
    if (all) {
      all.addEventListener('change', function () {
        rows.forEach(function (r) { r.checked = all.checked; });
        if (all.checked) {
          var sel = bulk.querySelector('input[name="scope"][value="selected"]');
          if (sel) { sel.checked = true; }
        }
        update();
      });
    }
    bulk.addEventListener('change', update);
    update();
  }

  // Failure list: remember the last filter in local storage and offer it back.
  var filterForm = document.getElementById('filter-form');
  if (filterForm) {
    var key = 'redrive.failures.filter';
    var params = new URLSearchParams(window.location.search);
    params.delete('cursor');
    params.delete('prev'); // Triage at scale: the paging history is no part of the filter.
    var current = params.toString();
    var restore = document.getElementById('restore-filter');
    var store = null;
    try { store = window.localStorage; } catch (e) { store = null; }
    if (store) {
      if (current) {
        store.setItem(key, current);
      } else if (store.getItem(key) && restore) {
        restore.href = '/failures?' + store.getItem(key);
        restore.hidden = false;
      }
      var clear = document.getElementById('clear-filter');
      if (clear) { clear.addEventListener('click', function () { store.removeItem(key); }); }
    }
    // Leave empty fields out of the address, so that shared links stay short. Only the
    // fields disabled here are enabled again when the page shows (back from the history):
    // those the page was served with disabled (the payload criteria of a principal without
    // the payload permission) stay disabled.
    filterForm.addEventListener('submit', function () {
      filterForm.querySelectorAll('input').forEach(function (i) {
        if (i.type !== 'checkbox' && i.value === '' && !i.disabled) { i.disabled = true; i.dataset.emptyOnSubmit = 'true'; }
      });
    });
    window.addEventListener('pageshow', function () {
      filterForm.querySelectorAll('input[data-empty-on-submit]').forEach(function (i) {
        i.disabled = false;
        delete i.dataset.emptyOnSubmit;
      });
    });
  }

  // Copy buttons (the stack trace).
  document.querySelectorAll('[data-copy]').forEach(function (b) {
    var target = document.getElementById(b.getAttribute('data-copy'));
    if (!target) { return; }
    b.hidden = false;
    b.addEventListener('click', function () {
      var text = target.textContent;
      var done = function (label) {
        b.textContent = label;
        window.setTimeout(function () { b.textContent = 'Copy'; }, 1500);
      };
      var selectIt = function () {
        var range = document.createRange();
        range.selectNodeContents(target);
        var sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
        done('Selected: press Ctrl+C');
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { done('Copied'); }, selectIt);
      } else {
        selectIt();
      }
    });
  });

  // Jobs and reactivations: the failure list's job buttons follow the bulk buttons, and a
  // running job's or run's page polls its progress (JSON) and updates its fields and bar.
  var jobButtons = [document.getElementById('job-retry'), document.getElementById('job-close')];
  var bulkClose = document.getElementById('bulk-close');
  if (bulk && bulkClose) {
    var syncJobButtons = function () {
      jobButtons.forEach(function (b) { if (b) { b.disabled = bulkClose.disabled; } });
    };
    bulk.addEventListener('change', syncJobButtons);
    syncJobButtons();
  }
  document.querySelectorAll('[data-progress]').forEach(function (live) {
    if (live.getAttribute('data-running') !== 'true' || !window.fetch) { return; }
    var bar = live.querySelector('progress');
    var reload = live.querySelector('[id$="-reload"]');
    var poll = function () {
      window.fetch(live.getAttribute('data-progress'), { credentials: 'same-origin', headers: { Accept: 'application/json' } })
        .then(function (r) { if (!r.ok) { throw new Error('status ' + r.status); } return r.json(); })
        .then(function (p) {
          Object.keys(p.fields || {}).forEach(function (name) {
            live.querySelectorAll('[data-field="' + name + '"]').forEach(function (el) { el.textContent = p.fields[name]; });
          });
          if (bar && p.max > 0) {
            bar.max = p.max;
            bar.value = p.value;
          }
          live.querySelectorAll('form[data-states]').forEach(function (f) {
            f.hidden = f.getAttribute('data-states').split(' ').indexOf(p.state) < 0;
          });
          live.setAttribute('data-running', p.running ? 'true' : 'false');
          if (p.running) {
            window.setTimeout(poll, 1500);
          } else if (reload) {
            reload.hidden = false;
          }
        })
        .catch(function () { window.setTimeout(poll, 5000); });
    };
    window.setTimeout(poll, 1000);
  });

  // Payload views as tabs (without scripts every view shows, one under the other).
  document.querySelectorAll('.tabs[role="tablist"]').forEach(function (list) {
    var tabs = Array.prototype.slice.call(list.querySelectorAll('[role="tab"]'));
    var select = function (tab, focus) {
      tabs.forEach(function (t) {
        var on = t === tab;
        t.setAttribute('aria-selected', on ? 'true' : 'false');
        t.tabIndex = on ? 0 : -1;
        var panel = document.getElementById(t.getAttribute('aria-controls'));
        if (panel) { panel.hidden = !on; }
      });
      if (focus) { tab.focus(); }
    };
    tabs.forEach(function (t, i) {
      t.addEventListener('click', function () { select(t, false); });
      t.addEventListener('keydown', function (e) {
        var j = -1;
        if (e.key === 'ArrowRight') { j = (i + 1) % tabs.length; }
        if (e.key === 'ArrowLeft') { j = (i - 1 + tabs.length) % tabs.length; }
        if (e.key === 'Home') { j = 0; }
        if (e.key === 'End') { j = tabs.length - 1; }
        if (j >= 0) { e.preventDefault(); select(tabs[j], true); }
      });
    });
    var first = document.getElementById('tab-' + list.getAttribute('data-default')) || tabs[0];
    list.hidden = false;
    list.parentNode.classList.add('js-tabs');
    select(first, false);
  });
})();
