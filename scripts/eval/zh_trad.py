"""Small Simplified -> Traditional Chinese character table for the `traditional` stretch edit.

Why a hand-made table: the harness is standard-library only, and a repost site that serves
Traditional Chinese (Taiwan/Hong Kong portals) converts character by character in the common
case. A few hundred of the most frequent characters that differ between the two scripts cover
roughly a quarter of the characters of typical news text, which is enough to tell whether the
detector normalises scripts at all. Characters whose traditional form depends on the word
(干 乾/幹, 面 麵/面, 里 裡/里, 发 發/髮 ...) are mapped to their most frequent form or left out;
this is a test perturbation, not a converter.
"""

# Pairs "simplified traditional", Taiwan forms. Order does not matter; duplicates are tolerated
# only if they agree (checked in _build_table).
_PAIRS = """
万萬 与與 专專 业業 丛叢 东東 丝絲 丢丟 两兩 严嚴 丧喪 个個 临臨 为為 丽麗 举舉 么麼 义義 乌烏 乐樂
乔喬 习習 乡鄉 书書 买買 乱亂 争爭 于於 亏虧 云雲 亚亞 产產 亩畝 亲親 亿億 仅僅 从從 仑侖 仓倉 仪儀
们們 价價 众眾 优優 会會 伟偉 传傳 伤傷 伦倫 伪偽 体體 佣傭 侠俠 侣侶 侦偵 侧側 侨僑 俭儉 债債 倾傾
偿償 储儲 儿兒 党黨 兰蘭 关關 兴興 养養 兽獸 内內 冈岡 册冊 写寫 军軍 农農 冯馮 决決 况況 冻凍 净淨
凉涼 减減 凑湊 凤鳳 凭憑 凯凱 击擊 刘劉 则則 刚剛 创創 删刪 别別 剂劑 剑劍 剧劇 劝勸 办辦 务務 动動
劳勞 势勢 勋勳 区區 医醫 华華 协協 单單 卖賣 卢盧 卫衛 却卻 厂廠 厅廳 历歷 压壓 厌厭 县縣 参參 双雙
发發 变變 叙敘 叶葉 号號 叹嘆 吗嗎 启啟 吴吳 员員 听聽 呜嗚 响響 哑啞 哗嘩 团團 园園 围圍 国國 图圖
圆圓 圣聖 场場 坏壞 块塊 坚堅 坛壇 坝壩 坟墳 坠墜 垄壟 垒壘 执執 扩擴 扫掃 扬揚 扰擾 抚撫 抢搶 护護
报報 担擔 拟擬 拥擁 拦攔 择擇 挂掛 挡擋 挤擠 挥揮 损損 换換 据據 掷擲 揽攬 携攜 摄攝 摆擺 摇搖 数數
断斷 无無 旧舊 时時 旷曠 显顯 晋晉 晒曬 晓曉 晕暈 暂暫 术術 机機 杀殺 杂雜 权權 条條 来來 杨楊 极極
构構 枪槍 柜櫃 标標 栋棟 树樹 样樣 桥橋 检檢 楼樓 横橫 欢歡 欧歐 残殘 毁毀 毕畢 气氣 汇匯 汉漢 汤湯
沟溝 没沒 沪滬 泪淚 泽澤 洁潔 浅淺 测測 济濟 浏瀏 浑渾 浓濃 涂塗 涛濤 润潤 涨漲 渐漸 渔漁 温溫 湾灣
湿濕 满滿 滚滾 滞滯 灭滅 灯燈 灵靈 灾災 炉爐 点點 炼煉 烟煙 烦煩 烧燒 热熱 爱愛 爷爺 牵牽 犹猶 狮獅
独獨 狱獄 猎獵 猫貓 献獻 环環 现現 电電 画畫 畅暢 疗療 疯瘋 皱皺 盏盞 监監 盖蓋 盘盤 着著 矫矯 矿礦
码碼 砖磚 础礎 硕碩 确確 礼禮 祸禍 离離 种種 积積 称稱 税稅 稳穩 穷窮 窃竊 竞競 笔筆 简簡 签簽 类類
粮糧 紧緊 纠糾 红紅 约約 级級 纪紀 纯純 纲綱 纳納 纵縱 纸紙 纺紡 线線 练練 组組 细細 织織 终終 绍紹
经經 结結 绕繞 绘繪 给給 络絡 绝絕 统統 继繼 绩績 续續 维維 综綜 绿綠 缓緩 编編 缘緣 缩縮 缴繳 网網
罗羅 罚罰 职職 联聯 聪聰 肃肅 肠腸 肤膚 肿腫 胜勝 胁脅 脑腦 脚腳 脸臉 舰艦 节節 艺藝 苏蘇 荣榮 药藥
莱萊 获獲 营營 萧蕭 蓝藍 虑慮 虽雖 虾蝦 蚁蟻 补補 装裝 观觀 规規 视視 览覽 觉覺 计計 订訂 认認 讨討
让讓 训訓 议議 讯訊 记記 讲講 许許 论論 设設 访訪 证證 评評 识識 诉訴 词詞 译譯 试試 诗詩 诚誠 话話
询詢 该該 详詳 语語 误誤 说說 请請 诸諸 读讀 课課 谁誰 调調 谈談 谋謀 谓謂 谢謝 谱譜 贝貝 负負 贡貢
财財 责責 败敗 货貨 质質 贩販 购購 贯貫 贴貼 贵貴 贷貸 费費 贺賀 资資 赋賦 赏賞 赔賠 赛賽 赞贊 赶趕
赵趙 趋趨 跃躍 践踐 轨軌 转轉 轮輪 软軟 轻輕 载載 较較 辆輛 辉輝 输輸 辖轄 边邊 达達 迁遷 过過 运運
还還 这這 进進 远遠 违違 连連 迟遲 选選 递遞 逻邏 遗遺 邓鄧 邮郵 邻鄰 郑鄭 酱醬 释釋 针針 钓釣 钟鐘
钢鋼 钱錢 铁鐵 银銀 销銷 锁鎖 锅鍋 错錯 锦錦 键鍵 镇鎮 长長 门門 闪閃 闭閉 问問 闲閒 间間 闻聞 阅閱
队隊 阳陽 阴陰 阵陣 阶階 际際 陆陸 险險 随隨 隐隱 难難 雾霧 静靜 页頁 顶頂 项項 顺順 须須 顾顧 顿頓
预預 领領 频頻 题題 颜顏 额額 风風 飞飛 饭飯 饮飲 馆館 马馬 驱驅 驶駛 驻駐 验驗 骑騎 骗騙 鱼魚 鲁魯
鲜鮮 鸟鳥 鸡雞 鸣鳴 麦麥 黄黃 齐齊 齿齒 龙龍 龟龜 岁歲 广廣 庆慶 库庫 应應 废廢 开開 异異 张張 弹彈
强強 归歸 录錄 彻徹 径徑 忆憶 态態 怀懷 总總 恋戀 恶惡 惊驚 惧懼 惨慘 惯慣 愿願 戏戲 战戰 户戶 拨撥
阔闊 闹鬧 将將 尔爾 尘塵 尝嘗 层層 屿嶼 岗崗 岛島 峡峽 币幣 师師 帐帳 带帶 帮幫 庄莊 庙廟 处處 备備
头頭 夹夾 夺奪 奋奮 妇婦 妈媽 孙孫 学學 宁寧 宝寶 实實 宠寵 审審 宪憲 宫宮 宽寬 宾賓 对對 寻尋 导導
寿壽 尽盡 后後 见見 贸貿 际際 渠渠 汽汽 车車 轿轎 驾駕 驰馳 铜銅 铝鋁 锋鋒 镜鏡 闸閘 阀閥 陈陳 陕陝
亚亞 赣贛 辽遼 吉吉 黑黑 桂桂 渝渝 琼瓊 滨濱 绵綿 纽紐 丰豐 灿燦 烛燭 爆爆 递遞 邀邀 郁鬱 鉴鑒 钻鑽
铺鋪 链鏈 锻鍛 闯闖 韩韓 顽頑 颁頒 颗顆 饰飾 驳駁 骤驟 鸭鴨 鹅鵝 鹰鷹 麻麻 鼓鼓 龄齡 亏虧 亵褻 仿仿
"""


def _build_table() -> dict[int, str]:
    """Parse _PAIRS into a str.translate table, skipping identity pairs and rejecting conflicts."""
    table: dict[int, str] = {}
    for pair in _PAIRS.split():
        assert len(pair) == 2, pair
        simp, trad = pair
        if simp == trad:
            continue
        prev = table.get(ord(simp))
        assert prev is None or prev == trad, (simp, prev, trad)
        table[ord(simp)] = trad
    return table


S2T_TABLE = _build_table()


def to_traditional(text: str) -> str:
    """Convert the characters covered by the table; everything else passes through."""
    return text.translate(S2T_TABLE)
