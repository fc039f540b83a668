"""The timeline page: one self-contained HTML file (code, style and data inline, no URL at all),
so it opens offline, from a CI artifact.

The DOM contract (the browser tests and users' own scripts may rely on it):

- the data: ``<script type="application/json" id="ktest-timeline-data">`` (schema in
  :mod:`ktest.timeline.model`);
- lanes: elements ``[data-lane]`` valued ``test``, ``operator:<name>`` (one per operator),
  ``apiserver``, ``controllers``, on a plane with simulated nodes ``kube-scheduler`` and
  ``simulated-kubelet`` (when they have events), ``faults``;
- events: ``.event[data-kind=<kind>][data-time=<seconds since start>]`` inside their lane, kind one
  of request, watch-event, log, attempt, k8s-event, fault, gc, scheduling (a binding), kubelet (a
  simulated kubelet's status write), upgrade (a control-plane upgrade, as wide as it took, in the
  ``controllers`` lane), gap (the API server could not be watched, as wide as that lasted, in the
  ``apiserver`` lane), assertion-failure; hovering shows the label
  (``title``); time 0 is a small gutter right of the lane titles, so no event hides under them;
- clicking an event fills ``#details``: a request's method, path and response code, an object's
  diff between two resourceVersions as rows ``.diff-row[data-path="spec.replicas"]`` with
  ``.old`` and ``.new`` cells, a log record, an ``eventually`` attempt and its value;
- the failing assertion: one ``.event[data-kind=assertion-failure]`` in the ``test`` lane, and
  ``#failure`` shows its message;
- a recording that was cut (crash, interrupt): ``#truncated`` is visible and says where it stops;
- the view: it opens fitted to the whole test (no horizontal scrolling); ``#board[data-scale]`` is
  the current scale in pixels per second; keys ``+``/``-`` zoom around the middle of the view, the
  left and right arrows pan, ``0`` fits the whole test again (buttons ``#zoom-in``, ``#zoom-out``,
  ``#zoom-fit``).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

from ktest.base.procfs import private_directory, untrusted
from ktest.timeline.model import TimelineData

_STYLE = """
body{font:13px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fff}
header{padding:8px 12px;border-bottom:1px solid #ccd}
h1{font-size:15px;margin:0 0 4px}
#failure{white-space:pre-wrap;background:#fde8e8;border-left:4px solid #c62828;padding:6px 8px;margin:6px 0;
 font-family:ui-monospace,monospace;max-height:12em;overflow:auto}
#truncated{background:#fff4d6;border-left:4px solid #d08c00;padding:6px 8px;margin:6px 0}
#problems{color:#8a5a00}
#controls{margin:4px 0}.keys{color:#667;margin:0 10px}
#board{overflow-x:auto;border-bottom:1px solid #ccd}
.axis,.lane{display:flex;width:max-content;min-width:100%;min-height:26px;border-top:1px solid #eef}
.lane-title{flex:0 0 190px;box-sizing:border-box;padding:4px 6px;background:#f6f7fb;position:sticky;left:0;
 z-index:2;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-weight:600}
.track{position:relative;flex:0 0 auto;min-height:26px;overflow:hidden}
.tick{position:absolute;top:0;bottom:0;border-left:1px solid #dde;font-size:10px;color:#667;padding-left:2px}
.event{position:absolute;top:5px;width:7px;height:16px;margin-left:-3px;border-radius:2px;cursor:pointer;
 opacity:.85;background:#7a869a}
.event:hover,.event.selected{outline:2px solid #000;opacity:1;z-index:3}
.event[data-kind=request]{background:#3d7be0}.event[data-kind=request].error{background:#e07b00}
.event[data-kind=watch-event]{background:#2e9d5b}.event[data-kind=log]{background:#9aa3b5;width:3px;margin-left:-1px}
.event[data-kind=attempt]{background:#8e5bd8}.event[data-kind=attempt].passed{background:#4caf50}
.event[data-kind=k8s-event]{background:#00a3a3}.event[data-kind=fault]{background:#d32f2f}
.event[data-kind=gc]{background:#795548}
.event[data-kind=scheduling]{background:#5c6bc0}.event[data-kind=kubelet]{background:#558b2f}
.event[data-kind=upgrade]{background:#f2b400;margin-left:0;min-width:7px}
.event[data-kind=gap]{background:repeating-linear-gradient(45deg,#d08c00 0 4px,#fff4d6 4px 8px);margin-left:0;
 min-width:7px}
.event[data-kind=assertion-failure]{background:#c62828;width:4px;top:0;height:26px;margin-left:-2px}
.cutline{position:absolute;top:0;bottom:0;border-left:3px dashed #d08c00}
#details{padding:8px 12px;font-family:ui-monospace,monospace;white-space:pre-wrap}
#details table{border-collapse:collapse}
#details td,#details th{border:1px solid #dde;padding:2px 6px;text-align:left;
 vertical-align:top}
.old{background:#fde8e8}.new{background:#e6f6ea}
.legend span{display:inline-block;margin-right:10px}.legend i{display:inline-block;width:9px;height:9px;
 margin-right:3px;border-radius:2px}
"""

_SCRIPT = r"""
(function(){
"use strict";
var data=JSON.parse(document.getElementById("ktest-timeline-data").textContent);
var scale=120, fitted=true, selected=null, gutter=12, endPad=56, titleWidth=190;
var span=data.duration;
data.events.forEach(function(ev){var d=ev.detail||{};
 span=Math.max(span,ev.t,d.until===undefined?0:d.until);});
if(data.truncated){span=Math.max(span,data.truncated.at);}
span=Math.max(span,0.001);
function el(tag,attrs,text){var e=document.createElement(tag);for(var k in attrs){e.setAttribute(k,attrs[k]);}
 if(text!==undefined){e.textContent=text;}return e;}
function fmt(t){return (t>=0?"+":"")+t.toFixed(3)+"s";}
document.getElementById("title").textContent=data.test||"ktest timeline";
document.getElementById("meta").textContent="outcome: "+data.outcome+" \u00b7 started "+data.started+
 " \u00b7 "+data.duration.toFixed(2)+"s \u00b7 "+data.events.length+" events";
if(data.failure){var f=document.getElementById("failure");f.hidden=false;f.textContent=data.failure.message;}
if(data.truncated){var c=document.getElementById("truncated");c.hidden=false;
 c.textContent="The recording stops at "+fmt(data.truncated.at)+": "+data.truncated.reason+
 ". Nothing after that point is shown.";}
var problems=(data.problems||[]).slice();
for(var kind in (data.dropped||{})){
 problems.push(data.dropped[kind]+" earlier "+kind+" events left out (size cap)");}
if(problems.length){var p=document.getElementById("problems");p.hidden=false;p.textContent="Not recorded: "+
 problems.join("; ");}
var board=document.getElementById("board");
function x(t){return gutter+t*scale;}
function visible(){return Math.max(200,(board.clientWidth||window.innerWidth)-titleWidth);}
function fitScale(){return (visible()-gutter-endPad)/span;}
function width(){return Math.max(visible(),Math.ceil(gutter+span*scale+endPad-0.01));}
function draw(){
 board.textContent="";board.setAttribute("data-scale",String(scale));
 var w=width();
 var axis=el("div",{"class":"axis"});axis.appendChild(el("div",{"class":"lane-title"},"time"));
 var at=el("div",{"class":"track"});at.style.width=w+"px";
 var step=[0.1,0.25,0.5,1,2,5,10,30,60].filter(function(s){return s*scale>=70;})[0]||60;
 for(var t=0;t<=span+1e-9;t+=step){var k=el("div",{"class":"tick"},fmt(t));
  k.style.left=x(t)+"px";
  at.appendChild(k);}
 axis.appendChild(at);board.appendChild(axis);
 var tracks={};
 data.lanes.forEach(function(lane){
  var row=el("div",{"class":"lane","data-lane":lane.id});
  row.appendChild(el("div",{"class":"lane-title","title":lane.title},lane.title));
  var track=el("div",{"class":"track"});track.style.width=w+"px";row.appendChild(track);
  if(data.truncated){var cl=el("div",{"class":"cutline","title":"the recording stops here"});
   cl.style.left=x(data.truncated.at)+"px";track.appendChild(cl);}
  tracks[lane.id]=track;board.appendChild(row);
 });
 data.events.forEach(function(ev,i){
  var track=tracks[ev.lane]||tracks.test;
  var cls="event";var d=ev.detail||{};
  if(ev.kind==="request"&&d.code!==null&&d.code!==undefined&&d.code>=400){cls+=" error";}
  if(ev.kind==="attempt"&&d.verdict==="passed"){cls+=" passed";}
  var e=el("div",{"class":cls,"data-kind":ev.kind,"data-time":String(ev.t),"data-index":String(i),
   "title":fmt(ev.t)+" "+ev.label,"tabindex":"0"});
  e.style.left=x(ev.t)+"px";
  if(d.until!==undefined&&(ev.kind==="upgrade"||ev.kind==="gap")){e.style.width=((d.until-ev.t)*scale)+"px";}
  track.appendChild(e);
 });
}
function row(table,name,value){var tr=el("tr");tr.appendChild(el("th",{},name));
 tr.appendChild(el("td",{},value===null||value===undefined?"":String(value)));table.appendChild(tr);}
function show(ev){
 var box=document.getElementById("details");box.textContent="";
 box.appendChild(el("div",{"class":"details-head"},fmt(ev.t)+"  ["+ev.kind+"]  "+ev.label));
 var d=ev.detail||{};var table=el("table",{"class":"details-fields"});
 if(ev.kind==="request"){["method","path","code","latency_ms","verb","fault","error","refused","closed_by",
  "field_manager","user_agent","events"].forEach(function(k){if(d[k]!==undefined){row(table,k==="code"?
  "response code":k,d[k]);}});}
 else{for(var k in d){if(k!=="diff"&&k!=="diffCut"){row(table,k,typeof d[k]==="object"&&d[k]!==null?
  JSON.stringify(d[k]):d[k]);}}}
 box.appendChild(table);
 if(d.diff){
  box.appendChild(el("div",{},"changes from resourceVersion "+(d.previousResourceVersion||"(none)")+" to "+
   (d.resourceVersion||"(deleted)")+":"));
  var diff=el("table",{"class":"diff"});var head=el("tr");["field","old","new"].forEach(function(h){
   head.appendChild(el("th",{},h));});diff.appendChild(head);
  d.diff.forEach(function(r){var tr=el("tr",{"class":"diff-row","data-path":r.path});
   tr.appendChild(el("td",{"class":"path"},r.path));tr.appendChild(el("td",{"class":"old"},r.old===null?"(absent)":r.old));
   tr.appendChild(el("td",{"class":"new"},r.new===null?"(absent)":r.new));diff.appendChild(tr);});
  box.appendChild(diff);
  if(d.diffCut){box.appendChild(el("div",{},d.diffCut+" more changed fields not shown"));}
 }
}
document.getElementById("board").addEventListener("click",function(e){
 var t=e.target;if(!t.classList||!t.classList.contains("event")){return;}
 if(selected){selected.classList.remove("selected");}selected=t;t.classList.add("selected");
 show(data.events[Number(t.getAttribute("data-index"))]);});
document.getElementById("board").addEventListener("keydown",function(e){
 if(e.key==="Enter"&&e.target.classList.contains("event")){e.target.click();}});
function zoom(factor){
 var middle=(board.scrollLeft+visible()/2-gutter)/scale;
 scale=Math.max(fitScale(),scale*factor);fitted=scale<=fitScale();draw();
 board.scrollLeft=Math.max(0,gutter+middle*scale-visible()/2);}
function fit(){scale=fitScale();fitted=true;draw();board.scrollLeft=0;}
function pan(direction){board.scrollLeft+=direction*visible()/4;}
document.getElementById("zoom-in").onclick=function(){zoom(2);};
document.getElementById("zoom-out").onclick=function(){zoom(0.5);};
document.getElementById("zoom-fit").onclick=fit;
document.addEventListener("keydown",function(e){
 if(e.ctrlKey||e.metaKey||e.altKey){return;}
 var tag=(e.target&&e.target.tagName)||"";if(tag==="INPUT"||tag==="TEXTAREA"){return;}
 var act={"+":function(){zoom(2);},"=":function(){zoom(2);},"-":function(){zoom(0.5);},
  "_":function(){zoom(0.5);},"0":fit,"ArrowRight":function(){pan(1);},"ArrowLeft":function(){pan(-1);}}[e.key];
 if(act){e.preventDefault();act();}});
window.addEventListener("resize",function(){if(fitted){fit();}});
fit();
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none';
 style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>ktest timeline: {title}</title><style>{style}</style></head>
<body><header><h1 id="title"></h1><div id="meta"></div>
<div id="failure" hidden></div><div id="truncated" hidden></div><div id="problems" hidden></div>
<div id="controls"><button id="zoom-out" type="button" title="key: -">zoom out</button>
<button id="zoom-in" type="button" title="key: +">zoom in</button>
<button id="zoom-fit" type="button" title="key: 0">whole test</button>
<span class="keys">keys: + / - zoom, &larr; &rarr; pan, 0 whole test</span>
<span class="legend"><span><i style="background:#3d7be0"></i>request</span>
<span><i style="background:#e07b00"></i>request &ge; 400</span>
<span><i style="background:#2e9d5b"></i>watch event</span><span><i style="background:#9aa3b5"></i>log</span>
<span><i style="background:#8e5bd8"></i>attempt</span><span><i style="background:#00a3a3"></i>Event</span>
<span><i style="background:#d32f2f"></i>fault</span>
<span><i style="background:#795548"></i>GC / controllers</span>
<span><i style="background:#5c6bc0"></i>scheduling</span>
<span><i style="background:#558b2f"></i>kubelet</span>
<span><i style="background:#f2b400"></i>control plane upgrade</span>
<span><i style="background:#d08c00"></i>API server not seen</span>
<span><i style="background:#c62828"></i>failing assertion</span></span></div></header>
<div id="board"></div>
<div id="details">Click an event for its details.</div>
<script type="application/json" id="ktest-timeline-data">{data}</script>
<script>{script}</script>
</body></html>
"""


def embedded_json(timeline: TimelineData) -> str:
    """The data as it sits in the page: JSON with ``<``, ``>`` and ``&`` escaped, so no value can
    close the script element or open a comment."""
    text = json.dumps(timeline.as_json(), separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(timeline: TimelineData) -> str:
    from html import escape

    return _PAGE.format(
        title=escape(timeline.test or "recording"), style=_STYLE, data=embedded_json(timeline), script=_SCRIPT
    )


def write_page(timeline: TimelineData, path: Path) -> Path:
    """Write the page atomically (a half-written file is never left under ``path``), readable
    by this user only (0600: it shows the test's objects). The page's directory and the one
    above it (``<artifacts>/timelines``) are refused, with a PermissionError naming them, when
    another user could take them over: a symlink not of this user's, a directory of another
    user's, or one everyone may write in without the sticky bit."""
    _refuse_untrusted(path.parent)
    private_directory(path.parent)
    _refuse_untrusted(path.parent)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # 0600, O_EXCL
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(render(timeline))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def _refuse_untrusted(directory: Path) -> None:
    """PermissionError when ``directory`` or its parent, as far as they exist, could be another
    user's to redirect or swap (see :func:`write_page`)."""
    for checked in (directory.parent, directory):
        try:
            found = os.lstat(checked)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(found.st_mode) and found.st_uid != os.getuid():
            raise PermissionError(
                f"refusing to write a timeline page through {checked}: a symlink of uid {found.st_uid}, "
                f"not of this user's, so another user chooses where the page goes. Remove it, or set "
                "ktest_artifacts (--ktest-artifacts) to a directory of your own."
            )
        problem = untrusted(checked, os.stat(checked), group_may_write=True)
        if problem:
            raise PermissionError(
                f"refusing to write a timeline page in {checked}: {problem}, so another user could "
                "read the page or swap it. Set ktest_artifacts (--ktest-artifacts) to a directory of "
                "your own, or fix "
                f"{checked} (`chown $USER`, `chmod go-w`)."
            )
