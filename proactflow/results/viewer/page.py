"""The viewer's page: HTML and CSS, with the script of `script.py`; `site.py` puts the
index in.

Images (the exact image a multimodal model saw, a video's frames) are files of `media/`
beside the page, named by their hash, shown by `<img>`: never inline in the index.

Every piece of data is put on screen with text nodes (`textContent`, `createTextNode`), never
parsed as HTML, so a response holding `<script>` shows as those characters. Each row of the
list is one line (cells cut with an ellipsis, the full text on hover), so a 900-pixel-high
window shows thirty or more verdicts.
"""

from .script import SCRIPT

STYLE = r"""
html,body{height:100%}
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa;
 display:flex;flex-direction:column}
header{padding:6px 16px;background:#243b53;color:#fff;display:flex;gap:16px;
 align-items:baseline}
header h1{font-size:16px;margin:0}
#summary{font-size:13px;opacity:.85}
#filters{display:flex;flex-wrap:wrap;gap:10px;padding:6px 16px;background:#fff;
 border-bottom:1px solid #ddd}
#filters fieldset{border:1px solid #ccd;border-radius:6px;padding:2px 8px;max-height:78px;
 max-width:40vw;overflow-y:auto;margin:0}
#filters legend{font-weight:600;font-size:12px}
#filters label{display:inline-block;margin-right:10px;font-size:13px;line-height:18px;
 white-space:nowrap}
main{flex:1;min-height:0;display:grid;grid-template-columns:minmax(440px,45%) 1fr}
#list{overflow:auto;border-right:1px solid #ddd;background:#fff}
#list table{border-collapse:collapse;width:100%;font-size:13px;table-layout:fixed}
#list th,#list td{padding:1px 6px;line-height:16px;border-bottom:1px solid #eee;
 text-align:left;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
#list thead th{position:sticky;top:0;background:#f3f5f8}
#list tbody tr{cursor:pointer}#list tbody tr:hover{background:#eef4fb}
#list tr.open{background:#dbe9f8}
#pager{padding:4px 6px;display:flex;gap:8px;align-items:center;font-size:13px}
#detail{overflow:auto;padding:12px 16px}
.badge{display:inline-block;white-space:nowrap;padding:0 7px;border-radius:9px;font-size:12px;line-height:16px;
 font-weight:600}
.PASS{background:#d3f2dc;color:#155724}.PARTIAL{background:#fff1c2;color:#7a5a00}
.FAIL{background:#f8d3d3;color:#7d1a1a}.not{background:#e4e4e7;color:#3f3f46}
.rubric{display:grid;grid-template-columns:repeat(3,1fr);gap:8px}
.rubric div{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px 8px;
 font-size:13px}
.context{max-height:260px;overflow:auto;background:#fff;border:1px solid #ddd;border-radius:6px;
 padding:6px 10px}
.msg{margin:6px 0;white-space:pre-wrap;overflow-wrap:anywhere}
.msg b{color:#555}.msg.trigger{background:#eef4fb;border-left:3px solid #3a78c2;padding-left:6px}
#sides{display:flex;flex-wrap:wrap;gap:10px;align-items:flex-start;padding-bottom:8px}
.side{flex:1 1 300px;min-width:0;max-width:640px;background:#fff;border:1px solid #ccd;
 border-radius:6px;padding:8px 10px;overflow-x:auto}
.side h3{font-size:14px;margin:0 0 6px;overflow-wrap:anywhere}
.response{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;padding:6px;
 border-radius:4px}
mark{background:#ffe066}.note{font-size:12px;color:#8a4b00}
#detail h2{overflow-wrap:anywhere;font-size:18px;margin:0 0 4px}
.empty{color:#777;padding:20px}
.facts{display:flex;flex-wrap:wrap}.facts span{margin-right:14px;white-space:nowrap}
.blocktable{overflow-x:auto;margin:4px 0}
.blocktable table{border-collapse:collapse;font-size:12px}
.blocktable th,.blocktable td{border:1px solid #e2e2e8;padding:2px 5px;vertical-align:top;
 text-align:left;white-space:pre-wrap;overflow-wrap:break-word;max-width:320px}
.blocktable th{background:#f3f5f8;white-space:nowrap}.blocktable tr.marked td{background:#fff6d6}
img.thumb{height:54px;margin:1px;border:1px solid #ccd;vertical-align:middle}
img.shot{max-width:100%;max-height:360px;border:1px solid #ccd}
figure{margin:6px 0}figcaption{font-size:12px;color:#555}
.strip{white-space:nowrap}
"""

PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>proactflow viewer</title>
<style>""" + STYLE + r"""</style></head>
<body>
<header><h1>proactflow viewer</h1><div id="summary"></div></header>
<div id="filters"></div>
<main><section id="list"></section><section id="detail"></section></main>
<script>""" + SCRIPT + r"""</script></body></html>
"""
